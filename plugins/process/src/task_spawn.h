// Starting a task's leader process, on the runner's call thread (launch): clone(CLONE_VM) and
// exec. The child shares the agent's memory until exec, on a stack of its own, and runs only
// raw system calls the parent prepared (task_spawn.cpp): a process group of its own, the
// signals the agent catches or ignores back to their default, stdin from /dev/null, stdout and
// stderr to the work directory's files, the configured limits and user, the working directory,
// exec. No page table is copied, however large the agent.
//
// Two ways, by what the launch must know before it returns:
//   ExecWait::kNo   (the default) returns as soon as the child exists; the child sets itself
//                   up and execs on its own while the runner goes on (RUNNING out, the exit
//                   watched), so the launch waits neither for the exec nor for the scheduler
//                   to run the launching thread again after it (which put it behind the
//                   running task, on the CPU the task was started on). What can fail there
//                   is checked first (the program is an executable file, stdout and stderr
//                   open): those stay launch errors. A step that fails anyway (an exec the
//                   kernel refuses: a bad binary, a missing interpreter) is written into the
//                   ChildLaunch, which the runner keeps until it has reaped the child, and
//                   then reads (failure()): the task ends FAILED with the same words.
//   ExecWait::kYes  (another user, resource limits: steps the parent cannot check for the
//                   child) the thread waits (CLONE_VFORK) until the child has exec'd or
//                   failed; a failed step is the launch error, thrown.
// Where the child's system calls cannot be made without libc's errno (which is the launching
// thread's: only x86-64 and AArch64 have them inline here), kNo is taken as kYes.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dockhand/base/unique_fd.h"
#include "process_config.h"

namespace dockhand::plugins::process {

// Who the leader becomes: setgroups([gid]), setresgid, setresuid.
struct TaskUser {
  uid_t uid = 0;
  gid_t gid = 0;
};

enum class ExecWait { kNo, kYes };

// What a child started with ExecWait::kNo reads from the agent's memory until it has exec'd
// (its plan, stack, argv and environment), and where it writes the step that failed. The
// runner keeps it while the child may still use it: until the child is reaped, or until
// done() when the runner lets the child go (a restart in place).
class ChildLaunch {
 public:
  struct Plan;
  explicit ChildLaunch(std::unique_ptr<Plan> plan);
  ~ChildLaunch();
  ChildLaunch(const ChildLaunch&) = delete;
  ChildLaunch& operator=(const ChildLaunch&) = delete;

  // The child has exec'd or ended: nothing of this is used any more.
  bool done() const;
  // Waits at most `limit` for done().
  bool waitDone(std::chrono::milliseconds limit) const;
  // Once the child is reaped: the launch error of the step that failed before exec
  // ("cannot start 'x': Exec format error"), or nullopt when it exec'd.
  std::optional<std::string> failure() const;

 private:
  std::unique_ptr<Plan> plan_;
};

struct Spawned {
  pid_t pid = -1;                       // also the process group's id
  std::unique_ptr<ChildLaunch> launch;  // ExecWait::kNo: keep until the child is reaped
};

// What every launch of one runner uses, opened once (a ProcessRunner holds one): /dev/null, the
// tasks' stdin, and /proc/self/status, where the agent's signal dispositions are read at each
// launch in one read (about 10 us here) rather than 64 queries of the kernel (about 34 us).
class SpawnFiles {
 public:
  // Throws sdk::Error when /dev/null cannot be opened; without /proc, each launch asks the
  // kernel signal by signal.
  SpawnFiles();
  int devNull() const { return dev_null_.get(); }
  // The signals whose disposition is not SIG_DFL now (bit sig - 1): the agent's handlers, which
  // must not run in the child, and what it ignores, which the task must not inherit. Read at
  // each launch: a plugin may set a handler any time.
  std::uint64_t signalsNotDefault() const;

 private:
  UniqueFd dev_null_;
  UniqueFd status_;  // /proc/self/status, or -1
};

// The program a bare command names, looked up in the agent's PATH like execvp does. Throws
// the launch error when there is none.
std::string searchPath(const std::string& name);

// Starts spec.argv with `env`, `limits` (soft and hard) and, when `user` is set, as that user,
// who then owns the stdout and stderr files. Throws sdk::Error with the launch error.
Spawned spawnTask(const TaskSpec& spec, std::vector<std::string> env, const ResourceLimits& limits,
                  const std::optional<TaskUser>& user, ExecWait wait, const SpawnFiles& files);

}  // namespace dockhand::plugins::process
