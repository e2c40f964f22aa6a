// ProcessRunner: the `process` task runner. Each task is one command started with clone +
// exec in a process group of its own (task_spawn.h: launch returns before the exec, or, for
// another user or resource limits, once the program runs); one reaper thread per instance
// waits for the group leaders to exit (epoll over pidfds), kills what they leave behind and
// reports (FAILED with the step named when the child could not exec).
// The task's environment is built by task_environment.h, its files handled by task_files.h.
// Its side of a restart in place (detach, adopt) is process_handover.cpp.
//
// Flow of a task (launch, kill and threadDump come one at a time, in order, on the call
// thread the agent keeps for this runner: agent/plugins/plugin_calls.h):
//   launch (call thread)  parse task_json -> spawn -> pidfd_open -> RUNNING -> epoll add
//   kill   (call thread)  SIGTERM (or SIGKILL) to the group; a graceful kill arms a deadline
//                         after which the reaper sends SIGKILL
//   reaper (own thread)   pidfd readable -> SIGKILL the group -> reap the leader -> reap the
//                         group's leftovers (the agent is a child subreaper) -> report once
//
// Locking: `mutex_` guards `tasks_` and the deadlines. A task leaves `tasks_` (under the lock)
// exactly when the reaper takes its exit, so kill() and threadDump() never signal a group
// whose leader has been reaped (its pid, and so the group id, cannot have been reused).
// Host callbacks are made outside the lock.
//
// Restart in place: detach (call thread) takes a task out of `tasks_` and the epoll set and
// closes its pidfd without a signal; the process is left to the next program, which adopts
// it (a pidfd again, back in `tasks_`) and reaps it as any other.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "dockhand/plugin.hpp"
#include "process_config.h"
#include "task_spawn.h"
#include "task_usage.h"

namespace dockhand::plugins::process {

class ProcessRunner final : public sdk::TaskRunner {
 public:
  static constexpr const char* kConfigSchema = kProcessConfigSchema;

  ProcessRunner(sdk::Host host, std::string_view config_json);
  ~ProcessRunner() override;

  void launch(std::string_view task_json) override;
  void kill(std::uint64_t task_id, bool interrupt, std::string_view reason) override;
  std::string threadDump(std::uint64_t task_id) override;
  // A restart in place (plugin.h, detach/adopt): the task's process group runs on, still a
  // child of the agent's process, and the new program waits for it again. The handle:
  //   {"pid": N, "start_ticks": N, "started_ns": N, "work_dir": "..."}
  // pid and start_ticks (/proc/<pid>/stat) name the process across pid reuse; started_ns is
  // its start on the steady clock (CLOCK_MONOTONIC, the same in the new program), so that
  // its duration counts from its launch.
  std::string detach(std::uint64_t task_id) override;
  void adopt(std::uint64_t task_id, std::string_view handle_json) override;

 private:
  using Clock = std::chrono::steady_clock;
  // How long detach waits for a task launched a moment before to exec (it takes about a
  // millisecond): its plan may be freed only then.
  static constexpr std::chrono::milliseconds kExecWaitOnDetach{1000};
  // The epoll ids of the reaper's wake-up descriptor and of its memory-sample timer (a task's
  // id is its pidfd's; no task may have one of these: kFirstReservedId and above).
  static constexpr std::uint64_t kWakeId = std::numeric_limits<std::uint64_t>::max();
  static constexpr std::uint64_t kSampleId = kWakeId - 1;
  static constexpr std::uint64_t kFirstReservedId = kSampleId;

  struct Task {
    std::uint64_t id = 0;
    pid_t pid = -1;  // also the process group id
    int pidfd = -1;
    std::string work_dir;
    Clock::time_point started;
    bool kill_requested = false;
    std::string kill_reason;
    std::optional<Clock::time_point> kill_deadline;
    std::uint64_t sampled_peak_kib = 0;  // the leader's VmHWM, the most sampled (reaper only)
    bool adopted = false;                // taken back after a restart in place
    // Its plan, which the child reads until it has exec'd, and where it says which step
    // failed before (task_spawn.h, ExecWait::kNo). Kept until the leader is reaped.
    std::unique_ptr<ChildLaunch> launch;
  };

  // A task whose leader has been reaped, waiting for the rest of its group to be reaped.
  struct Exited {
    Task task;
    int wait_status = 0;
    TaskUsage usage;  // of the processes reaped so far
    Clock::time_point ended;
    Clock::time_point drain_deadline;
    Clock::time_point next_try;
  };

  // Gives a task's work directory to the task's user (when tasks run as another user);
  // throws the launch error.
  void giveWorkDir(const std::string& work_dir);
  // Gives a task's work directory back to the agent (when tasks run as another user).
  void takeBack(std::uint64_t task_id, const std::string& work_dir);

  void reaperLoop();
  void wake();
  void onLeaderExit(std::uint64_t task_id);
  // Reaps what is left of the group, adding each process's usage; true when nothing is.
  static bool drainGroup(pid_t pgid, TaskUsage& usage);
  void report(const Exited& exited);
  // Milliseconds until the next deadline (kill escalation, drain retry, memory sample), or -1.
  int nextTimeoutMs();
  void fireDeadlines();
  // Samples each running task's leader's VmHWM (see task_usage.h), every kSampleEvery.
  void sampleMemory();

  sdk::Host host_;
  ProcessConfig config_;
  std::optional<TaskIdentity> identity_;  // config/user, resolved
  std::string env_user_;                  // USER/LOGNAME/HOME of a scrubbed environment
  std::string env_home_;
  bool waits_for_exec_ = false;  // another user or resource limits: wait for the exec
  SpawnFiles spawn_files_;       // /dev/null and /proc/self/status, for every launch
  int epoll_fd_ = -1;
  int wake_fd_ = -1;
  // A one-shot timer a launch arms when the reaper waits with nothing due, so that it wakes to
  // sample the task's memory without a wake-up per launch (once armed, it fires once, even
  // when every task ended first).
  int sample_fd_ = -1;
  void armSampleTimer();
  std::atomic<bool> stopping_{false};

  std::mutex mutex_;
  std::unordered_map<std::uint64_t, Task> tasks_;
  std::multimap<Clock::time_point, std::uint64_t> kill_deadlines_;  // graceful kills
  bool reaper_idle_ = false;  // the reaper waits with nothing due (no task to sample)

  // Reaper thread only.
  std::vector<Exited> draining_;
  Clock::time_point next_sample_{};

  std::thread reaper_;  // last: started once everything above exists
};

}  // namespace dockhand::plugins::process
