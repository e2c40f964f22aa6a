// dockhand/job.hpp — a header-only C++ layer over the job library C ABI (dockhand/job.h).
//
// A job library is a set of task functions, each `void f(dockhand::job::Task&)`, exported
// with one macro:
//
//   void count(dockhand::job::Task& task) {
//     std::string_view text = task.input(task.inputIds().at(0));
//     task.setResult(std::to_string(countWords(text)));
//   }
//   DOCKHAND_JOB_LIBRARY("wordcount", "1.0.0", "Counts words", DOCKHAND_TASK(count))
//
// A function fails its task by throwing: the exception's what() becomes the FAILED reason.
// It returns normally to finish it. Long work polls task.cancelled() or registers
// task.onKill(...) to be stopped by a kill (dockhand/job.h, KILL).
//
// Only the C++17 standard library is used here, so a job library depends on nothing of the
// agent. Parse task.args() (JSON text) with the JSON library of your choice.
#ifndef DOCKHAND_JOB_HPP
#define DOCKHAND_JOB_HPP

#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "dockhand/job.h"
#include "dockhand/plugin.hpp"

namespace dockhand::job {

// Log levels for Task::log.
enum class Level : std::int32_t {
  kTrace = DH_LOG_TRACE,
  kDebug = DH_LOG_DEBUG,
  kInfo = DH_LOG_INFO,
  kWarn = DH_LOG_WARN,
  kError = DH_LOG_ERROR,
};

// A failed call of the runner's table (an invalid block id, a failed write, a missing input):
// the status and the runner's message. The SDK's one error type (dockhand/plugin.hpp).
using Error = ::dockhand::sdk::Error;

// The running task, for the duration of the task function. Not copyable; use it from the
// function's thread (cancelled() from any thread).
class Task {
 public:
  Task(const dh_task_api* api, dh_task* task) noexcept : api_(api), task_(task) {}
  ~Task() {
    if (kill_) api_->on_kill(task_, nullptr, nullptr);
  }
  Task(const Task&) = delete;
  Task& operator=(const Task&) = delete;

  std::uint64_t id() const { return api_->task_id(task_); }
  std::uint32_t attempt() const { return api_->attempt(task_); }
  std::int64_t partition() const { return api_->partition(task_); }

  // The job file's "args" as JSON text ("null" when none).
  std::string_view args() const {
    std::size_t size = 0;
    const char* text = api_->args(task_, &size);
    return text == nullptr ? std::string_view("null") : std::string_view(text, size);
  }

  // The ids of the task's input blocks, in the order of its "inputs".
  std::vector<std::string> inputIds() const {
    std::vector<std::string> ids;
    std::size_t count = api_->input_count(task_);
    ids.reserve(count);
    for (std::size_t i = 0; i < count; ++i) ids.emplace_back(api_->input_id(task_, i));
    return ids;
  }

  // An input block's bytes (mapped read-only; valid until the function returns).
  std::string_view input(const std::string& block_id) const {
    const void* data = nullptr;
    std::size_t size = 0;
    check(api_->read_input(task_, block_id.c_str(), &data, &size));
    return {static_cast<const char*>(data), size};
  }

  // Appends bytes to an output block (docs: dockhand/job.h, write_output).
  void write(const std::string& block_id, std::string_view bytes) {
    check(api_->write_output(task_, block_id.c_str(), bytes.data(), bytes.size()));
  }

  // The task's result: a few bytes go back in the status update, more as a block.
  void setResult(std::string_view bytes) { api_->set_result(task_, bytes.data(), bytes.size()); }

  bool cancelled() const { return api_->cancelled(task_) != 0; }

  // Called once, from another thread, when the task is killed; must not block. Replaces an
  // earlier one; removed when the Task goes away.
  void onKill(std::function<void()> callback) {
    kill_ = std::make_unique<std::function<void()>>(std::move(callback));
    api_->on_kill(task_, &Task::callKill, kill_.get());
  }

  void log(Level level, const std::string& message) const {
    api_->log(task_, static_cast<std::int32_t>(level), message.c_str());
  }

  const dh_task_api* api() const noexcept { return api_; }
  dh_task* handle() const noexcept { return task_; }

 private:
  void check(dh_status status) const {
    if (status == DH_OK) return;
    const char* message = api_->last_error(task_);
    throw Error(status, message != nullptr ? message : "the runner refused the call");
  }

  static void callKill(void* user) noexcept {
    try {
      (*static_cast<std::function<void()>*>(user))();
    } catch (...) {  // NOLINT(bugprone-empty-catch): a kill callback has nobody to tell
    }
  }

  const dh_task_api* api_;
  dh_task* task_;
  std::unique_ptr<std::function<void()>> kill_;
};

// The C trampoline of a task function: runs it and turns an exception into the task's error.
template <void (*Function)(Task&)>
dh_status run(const dh_task_api* api, dh_task* handle) noexcept {
  try {
    Task task(api, handle);
    Function(task);
    return DH_OK;
  } catch (const std::exception& e) {
    api->set_error(handle, e.what());
  } catch (...) {
    api->set_error(handle, "the task function threw a non-standard exception");
  }
  return DH_ERROR;
}

}  // namespace dockhand::job

// One entry of DOCKHAND_JOB_LIBRARY: the function `fn`, named as in the source.
// (clang-format would read `run<&fn>` as two comparisons; `fn` is a function's name, which a
// template argument `&fn` takes unparenthesised.)
// clang-format off
// NOLINTBEGIN(bugprone-macro-parentheses)
#define DOCKHAND_TASK(fn) \
  dh_job_function { #fn, &::dockhand::job::run<&fn> }

// One entry with another name than the function's.
#define DOCKHAND_TASK_NAMED(name, fn) \
  dh_job_function { name, &::dockhand::job::run<&fn> }
// NOLINTEND(bugprone-macro-parentheses)
// clang-format on

// Defines dh_job_entry: the library's name, version, one-line description and its task
// functions (DOCKHAND_TASK entries). Use it once per library, at namespace scope.
#define DOCKHAND_JOB_LIBRARY(name, version, description, ...)           \
  extern "C" DH_EXPORT const dh_job_descriptor* dh_job_entry(void) {    \
    static const dh_job_function functions[] = {__VA_ARGS__};           \
    static const dh_job_descriptor descriptor = {                       \
        sizeof(dh_job_descriptor),                                      \
        DH_JOB_ABI_MAJOR,                                               \
        DH_JOB_ABI_MINOR,                                               \
        name,                                                           \
        version,                                                        \
        description,                                                    \
        functions,                                                      \
        static_cast<uint32_t>(sizeof(functions) / sizeof(*functions))}; \
    return &descriptor;                                                 \
  }

#endif  // DOCKHAND_JOB_HPP
