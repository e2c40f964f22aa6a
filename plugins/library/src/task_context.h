// TaskContext: one task as its task function sees it, the runner's side of dh_task_api
// (dockhand/job.h). The dh_task* a function gets is a TaskContext*.
//
// Threads: the task's own thread calls every dh_task_api function (args, read_input,
// write_output, set_result, ...) and, after the function returned, finish(). requestKill()
// comes from the runner's call thread (kill) or its shutdown; cancelled() from any thread.
// The kill callback is called under `callback_mutex_`, which on_kill and finish() take too: a
// callback never runs after the function removed it or returned, so its `user` data may go
// away with the function.
//
// Lifetime: owned by the runner's record of the task (a shared_ptr its thread holds); the
// input mappings and output files are released by finish().
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>

#include "dockhand/job.h"
#include "dockhand/plugin.hpp"
#include "library_config.h"

namespace dockhand::plugins::library {

// The runner's way to the host, closed by destroy(): after close() nothing reaches the host,
// whichever thread (a task thread left running after a kill among them) still tries. Held by
// the runner and every task; any thread.
class HostGate {
 public:
  explicit HostGate(sdk::Host host) : host_(host) {}
  // Runs `call(host)` unless closed. Calls from different threads run side by side (host
  // callbacks may come from any thread); close() waits for those in progress.
  template <class Call>
  bool with(Call&& call) {
    std::shared_lock lock(mutex_);
    if (closed_) return false;
    call(host_);
    return true;
  }
  void close() {
    std::unique_lock lock(mutex_);
    closed_ = true;
  }

 private:
  std::shared_mutex mutex_;
  bool closed_ = false;
  sdk::Host host_;
};

// Where a task's log lines go: the host (threads) or the worker's channel (worker processes).
using LogSink = std::function<void(std::int32_t level, const std::string& line)>;

class TaskContext {
 public:
  TaskContext(const TaskSpec& spec, LogSink log);
  ~TaskContext();
  TaskContext(const TaskContext&) = delete;
  TaskContext& operator=(const TaskContext&) = delete;

  // The table a task function gets, the same for every task.
  static const dh_task_api* api();
  dh_task* handle() { return reinterpret_cast<dh_task*>(this); }

  // Sets the cancelled flag and calls the kill callback (once, if one is registered).
  void requestKill();
  bool cancelled() const { return cancelled_.load(); }
  // After the function returned: no more callbacks; unmaps the inputs, closes the outputs.
  void finish();

  const std::string& result() const { return result_; }
  const std::string& error() const { return error_; }

 private:
  struct Mapping {
    void* address = nullptr;
    std::size_t size = 0;
  };

  static TaskContext& of(dh_task* task) { return *reinterpret_cast<TaskContext*>(task); }
  dh_status fail(dh_status status, std::string message);

  // dh_task_api, each as a static trampoline over the context.
  static std::uint64_t taskId(dh_task* task);
  static std::uint32_t attempt(dh_task* task);
  static std::int64_t partition(dh_task* task);
  static const char* args(dh_task* task, std::size_t* size);
  static std::size_t inputCount(dh_task* task);
  static const char* inputId(dh_task* task, std::size_t index);
  static dh_status readInput(dh_task* task, const char* block_id, const void** data,
                             std::size_t* size);
  static dh_status writeOutput(dh_task* task, const char* block_id, const void* data,
                               std::size_t size);
  static void setResult(dh_task* task, const void* data, std::size_t size);
  static void setError(dh_task* task, const char* message);
  static std::int32_t isCancelled(dh_task* task);
  static void onKill(dh_task* task, void (*callback)(void* user), void* user);
  static void log(dh_task* task, std::int32_t level, const char* message);
  static const char* lastError(dh_task* task);

  // Appends "<UTC time> <LEVEL> <message>" to <work_dir>/stdout, the task's log the agent
  // serves (GET /v1/tasks/<id>/logs/stdout); the directory (when the task has none yet) and
  // the file are made at the first line, the file closed by finish().
  void appendToTaskLog(std::int32_t level, const char* message);
  dh_status readInputOf(const char* block_id, const void** data, std::size_t* size);
  dh_status writeOutputOf(const char* block_id, const void* data, std::size_t size);

  const TaskSpec& spec_;
  LogSink log_;
  std::atomic<bool> cancelled_{false};

  std::mutex callback_mutex_;
  void (*callback_)(void*) = nullptr;
  void* callback_user_ = nullptr;
  bool callback_called_ = false;
  bool finished_ = false;

  // The task's log file; any thread of the task may log.
  std::mutex log_file_mutex_;
  int log_file_ = -1;
  bool log_file_opened_ = false;  // tried, or finished: never (re)opened after that

  // The task's thread only.
  std::map<std::string, Mapping> inputs_;
  std::map<std::string, int> outputs_;
  std::string result_;
  std::string error_;
  std::string last_error_;
};

}  // namespace dockhand::plugins::library
