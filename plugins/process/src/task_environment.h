// The environment a task's process starts with, built on the runner's call thread by launch()
// from the runner's config, the agent's own environment (read, never changed) and the task's
// variables. Pure functions of their arguments and the agent's environment; no state.
#pragma once

#include <sys/types.h>

#include <string>
#include <utility>
#include <vector>

#include "process_config.h"

namespace dockhand::plugins::process {

// PATH of a scrubbed environment, and the search path when the agent has no PATH.
inline constexpr const char* kDefaultPath = "/usr/local/bin:/usr/bin:/bin";

// USER/LOGNAME and HOME of a scrubbed environment when tasks run as the agent's own user:
// the passwd entry of `euid`, else its number and "/".
struct EnvironmentOwner {
  std::string user;
  std::string home;
};
EnvironmentOwner agentEnvironmentOwner(uid_t euid);

// The child's environment (a later value wins): either the agent's own, or (inherit_env
// false) a minimal PATH/HOME/USER/LOGNAME/LANG plus the agent variables named in env_allow;
// then the task's and the payload's. The agent's private variables are never passed.
std::vector<std::string> buildEnvironment(
    const ProcessConfig& config, const std::string& user, const std::string& home,
    const std::vector<std::pair<std::string, std::string>>& overrides);

// NULL-terminated pointers into `items` for execve and posix_spawn; valid while `items` is
// neither changed nor destroyed.
std::vector<char*> pointersTo(std::vector<std::string>& items);

}  // namespace dockhand::plugins::process
