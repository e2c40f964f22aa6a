// WorkerPool: the library runner with `worker_processes` N > 0. N worker processes
// (dockhand-library-worker, worker_main.cpp) are started with the runner; each runs one task at
// a time, so a task that crashes (or ignores its kill) costs a worker, which is replaced, and
// not the agent. The same job libraries, the same task functions, the same results as on
// threads.
//
// Channel (worker_channel.h), runner -> worker:
//   config {config}                 first, the runner's config JSON as text
//   run    {id, task, path, label, with_file}
//                                   a task: its task_json, the library's path and name; with
//                                   the first run of a library in a worker (with_file true),
//                                   the library's file the runner opened and checked
//                                   (SCM_RIGHTS), which the worker loads instead of the path
//   kill   {id, reason}             cancelled flag + kill callback, in the worker
//   dump   {id}                     sample the task thread's stack
// worker -> runner:
//   ready {pid}   start {id}   end {id, state, detail}   log {level, line}
//   dump {id, tid, stack | error}   fatal {reason} (then it exits)
//
// Flow: launch (call thread) queues the task and hands it to an idle worker, if any. The I/O
// thread polls every worker's socket: it reads messages (RUNNING at `start`, the terminal state
// at `end`), writes what could not be written at once, hands queued tasks to workers that
// became idle, and reaps: a worker whose channel closed is waited for, its task reported FAILED
// with the signal or exit status, and another worker started in its place. A killed task that
// has not ended kill_timeout_ms later has its worker killed (SIGKILL) and is reported KILLED.
//
// Locking: `mutex_` guards everything below it; statuses and log lines go to the host through
// the HostGate and never under `mutex_` (the gate's lock comes first, as in the runner).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <ctime>
#include <deque>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "job_library.h"
#include "library_config.h"
#include "task_context.h"
#include "worker_channel.h"

namespace dockhand::plugins::library {

class WorkerPool {
 public:
  // Starts config.worker_processes workers. Throws sdk::Error when the worker program is
  // missing or a worker cannot be started.
  WorkerPool(std::shared_ptr<HostGate> gate, const LibraryConfig& config, std::string config_json);
  // Kills what runs, waits a little for it, reports the rest KILLED and ends the workers.
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  // Queues the task for the next idle worker, with `library`: the job library's file the
  // worker is to load, opened and checked. Throws sdk::Error.
  void launch(const TaskSpec& spec, const std::string& task_json, const std::string& path,
              const std::string& label, std::shared_ptr<const LibraryFile> library);
  void kill(std::uint64_t task_id, const std::string& reason);  // throws DH_NOT_FOUND
  std::string threadDump(std::uint64_t task_id);
  std::string taskStats(std::uint64_t task_id);

  // The worker executable next to this plugin's library file.
  static std::string defaultProgram();

 private:
  using Clock = std::chrono::steady_clock;

  struct Process {
    pid_t pid = -1;
    int fd = -1;  // our end of the channel, non-blocking
    MessageReader reader;
    Outbox outbox;                      // what is not written yet
    std::set<std::string> libraries;    // paths whose file it was sent
    std::optional<std::uint64_t> task;  // the task it runs
    bool ready = false;
    bool closed = false;  // channel ended: to be reaped
    std::string fatal;    // what it said before it ended, if anything
  };

  struct Task {
    TaskSpec spec;
    std::shared_ptr<const LibraryFile> library;  // the job library's checked file
    std::string task_json;
    std::string path;
    std::string label;
    Process* process = nullptr;  // once handed to a worker
    pid_t pid = -1;
    bool started = false;
    bool kill_requested = false;
    std::string kill_reason;
    bool reaped = false;    // its worker was killed after kill_timeout_ms
    bool reported = false;  // terminal state sent
    // Held while one of this task's states goes to the host: in order, none after the last.
    std::mutex report_mutex;
    timespec cpu_at_start{};
  };

  // A status or a log line for the host, sent once `mutex_` is released.
  struct Event {
    std::shared_ptr<Task> task;  // null for a log line
    std::int32_t state = 0;
    std::string detail;  // the status's detail JSON, or the log line
    std::int32_t level = 0;
  };

  void spawn();  // under mutex_
  // `pass` (taken, -1 for none) goes with the message (SCM_RIGHTS).
  void send(Process& process, const nlohmann::json& message, int pass = -1);  // under mutex_
  bool flush(Process& process);                                               // under mutex_
  void dispatch();                                                            // under mutex_
  void wake();
  void ioLoop();
  void readFrom(Process& process, std::vector<Event>& events);  // under mutex_
  void handle(Process& process, const nlohmann::json& message, std::vector<Event>& events);
  void reap(std::vector<Event>& events);             // under mutex_
  void expireDeadlines(std::vector<Event>& events);  // under mutex_
  void deliver(std::vector<Event>& events);          // not under mutex_
  bool report(Task& task, std::int32_t state, const std::string& detail);

  std::shared_ptr<HostGate> gate_;
  const LibraryConfig& config_;
  std::string config_json_;
  std::string program_;
  int wake_fd_ = -1;

  std::mutex mutex_;
  std::condition_variable changed_;  // a task ended, a dump answered
  std::list<std::unique_ptr<Process>> processes_;
  std::unordered_map<std::uint64_t, std::shared_ptr<Task>> tasks_;  // not yet reported
  std::deque<std::uint64_t> queue_;                                 // not handed out yet
  std::multimap<Clock::time_point, std::uint64_t> deadlines_;       // killed tasks
  std::map<std::uint64_t, std::optional<nlohmann::json>> dumps_;    // asked for, answered
  int start_failures_ = 0;  // workers in a row that ended before they were ready
  std::string broken_;      // why no worker can be started any more
  bool stopping_ = false;
  bool closing_ = false;  // the I/O thread ends

  std::thread io_;  // last
};

}  // namespace dockhand::plugins::library
