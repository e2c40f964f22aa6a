// Starting a task's leader process, on the runner's call thread (launch). Two ways:
//   posix_spawn               the default: a new process group, signals reset, stdin from
//                             /dev/null, stdout and stderr to the work directory's files;
//   clone(CLONE_VM|VFORK)+exec for what posix_spawn cannot do: another user, resource limits.
//                             The child shares the agent's memory until exec and runs only raw
//                             system calls prepared by the parent (see task_spawn.cpp).
// Both return once the program runs (the pid, also the group id) or throw sdk::Error with
// the launch error; the caller owns the child from then on (pidfd, reaping). No state.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>

#include "process_config.h"

namespace dockhand::plugins::process {

// Who the leader becomes on the clone path: setgroups([gid]), setresgid, setresuid.
struct TaskUser {
  uid_t uid = 0;
  gid_t gid = 0;
};

// The program a bare command names, looked up in the agent's PATH like execvp does. Throws
// the launch error when there is none.
std::string searchPath(const std::string& name);

// argv and envp are NULL-terminated and outlive the call.
pid_t spawnWithPosixSpawn(const TaskSpec& spec, char* const* argv, char* const* envp);

// As spawnWithPosixSpawn, and with `limits` set (soft and hard) and, when `user` is set,
// running as that user, who then owns the stdout and stderr files.
pid_t spawnWithClone(const TaskSpec& spec, char* const* argv, char* const* envp,
                     const ResourceLimits& limits, const std::optional<TaskUser>& user);

}  // namespace dockhand::plugins::process
