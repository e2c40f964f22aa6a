// LibraryRunner: the `library` task runner. Each task calls one named function of a job
// library (dockhand/job.h) on a thread of the runner's cached pool, inside the agent, as a
// Spark executor's TaskRunner runs a task's code on a thread of its own.
//
// Flow of a task:
//   launch  (call thread)  parse task_json -> load (once) and check the job library -> find
//                          the function -> hand the task to the pool; never waits for it
//   tryLaunch (core thread) the same once the library is loaded (threads only): the agent's
//                          core thread starts the task without waking the call thread
//   pool    (task thread)  RUNNING -> the function -> its result (task_result.h) -> the
//                          terminal state, or KILLED when a kill came first
//   kill    (call thread)  cancelled flag + the function's kill callback; arms a deadline
//   reaper  (own thread)   a killed task whose function has not returned kill_timeout_ms
//                          later is reported KILLED and its thread left running (and, with
//                          exit_on_unkillable, the agent asked to end: Host::unrecoverable)
//   threadDump (call thread) samples the task thread's stack (stack_sampler.h)
//
// Locking: `state_->mutex` guards the task table, the libraries and the deadlines. Every
// status goes out through the HostGate, under whose lock a task's `reported` flag is set, so
// a task gets at most one RUNNING, then exactly one terminal state, in that order, and
// nothing after the destructor closed the gate.
//
// Lifetime: the state is shared with the task threads. The destructor kills what runs, waits
// a little for it, reports the rest KILLED, closes the gate and stops the pool; a thread whose
// function never returns is left running with the state, its task and its job library, and
// this plugin's own library is pinned (RTLD_NODELETE) so that its code stays mapped.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>

#include "dockhand/plugin.hpp"
#include "job_library.h"
#include "library_config.h"
#include "stack_sampler.h"
#include "task_context.h"
#include "thread_pool.h"
#include "worker_pool.h"

namespace dockhand::plugins::library {

class LibraryRunner final : public sdk::TaskRunner {
 public:
  static constexpr const char* kConfigSchema = kLibraryConfigSchema;
  // A task without inputs, outputs or a large result needs no directory: make it on demand.
  // Tasks are calls, not processes: task_json's "env" is never read.
  static constexpr std::uint32_t kRunnerFlags = DH_RUNNER_MAKES_WORK_DIR | DH_RUNNER_NO_TASK_ENV;

  LibraryRunner(sdk::Host host, std::string_view config_json);
  ~LibraryRunner() override;
  LibraryRunner(const LibraryRunner&) = delete;
  LibraryRunner& operator=(const LibraryRunner&) = delete;

  void launch(std::string_view task_json) override;
  // launch() when the job library is loaded already and tasks run on threads: nothing to
  // wait for. False otherwise (the first task of a library, worker processes).
  bool tryLaunch(std::string_view task_json) override;
  void kill(std::uint64_t task_id, bool interrupt, std::string_view reason) override;
  std::string threadDump(std::uint64_t task_id) override;
  std::string taskStats(std::uint64_t task_id) override;

 private:
  using Clock = std::chrono::steady_clock;

  struct Task {
    TaskSpec spec;
    std::string library_label;  // as the payload named it
    std::shared_ptr<JobLibrary> library;
    dh_task_fn function = nullptr;
    std::unique_ptr<TaskContext> context;
    // Guarded by State::mutex.
    WorkerThread* worker = nullptr;  // while the function runs
    Clock::time_point started;
    bool kill_requested = false;
    std::string kill_reason;
    bool returned = false;
    bool reported = false;  // terminal state sent
    // Held while one of this task's states goes to the host: they arrive in order, and none
    // after the terminal one. Tasks report side by side.
    std::mutex report_mutex;
  };

  struct State {
    State(sdk::Host host, LibraryConfig config);
    std::shared_ptr<HostGate> gate;
    LibraryConfig config;
    std::mutex mutex;
    // Two: the reaper is woken only for what it acts on, not by every task that ends.
    std::condition_variable reaper_wake;  // a deadline was armed, stopping
    std::condition_variable ended;        // a task ended (the destructor waits for the last)
    std::unordered_map<std::uint64_t, std::shared_ptr<Task>> tasks;   // not yet reported
    std::map<std::string, std::shared_ptr<JobLibrary>> libraries;     // by path
    std::map<std::string, std::shared_ptr<const LibraryFile>> files;  // by path (workers)
    std::multimap<Clock::time_point, std::uint64_t> deadlines;        // killed tasks
    bool stopping = false;
  };

  // The path of the library the payload names; throws DH_INVALID_ARGUMENT.
  std::string libraryPath(const TaskSpec& spec) const;
  std::shared_ptr<JobLibrary> loadLibrary(const std::string& path);
  // The library at `path` if loaded before, else null.
  std::shared_ptr<JobLibrary> loadedLibrary(const std::string& path) const;
  // Asks the agent's plugin_trust policy about a job library's opened file (verify_code).
  CodeVerifier verifier() const;
  // The checked file of the library at `path` for worker processes: opened, checked and
  // verified the first time (a refusal is not remembered), then kept. Throws sdk::Error.
  std::shared_ptr<const LibraryFile> libraryFile(const std::string& path);
  // launch(); with `may_wait` false, returns false rather than load a library (or hand the
  // task to a worker process).
  bool start(std::string_view task_json, bool may_wait);

  static void runTask(const std::shared_ptr<State>& state, const std::shared_ptr<Task>& task,
                      WorkerThread& worker);
  // Sends a state for `task`; a terminal one only once (false when it was sent before).
  static bool report(State& state, Task& task, std::int32_t status, const std::string& detail);
  void reaperLoop();
  void abandon(const std::shared_ptr<Task>& task, const std::string& why);

  std::shared_ptr<State> state_;
  std::unique_ptr<WorkerPool> workers_;  // worker_processes > 0: every task runs there
  StackSampler sampler_;
  CachedThreadPool pool_;
  std::thread reaper_;  // last: started once everything above exists
};

}  // namespace dockhand::plugins::library
