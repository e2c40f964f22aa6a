// The process runner's config and the payload of one task, parsed from JSON with errors that
// name the JSON path of the offending field.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace dockhand::plugins::process {

// Resource limits set (soft and hard) on each task's leader; unset ones are inherited.
struct ResourceLimits {
  std::optional<std::uint64_t> open_files;           // RLIMIT_NOFILE
  std::optional<std::uint64_t> processes;            // RLIMIT_NPROC
  std::optional<std::uint64_t> address_space_bytes;  // RLIMIT_AS
  std::optional<std::uint64_t> core_bytes;           // RLIMIT_CORE
  bool any() const { return open_files || processes || address_space_bytes || core_bytes; }
};

struct ProcessConfig {
  std::chrono::milliseconds kill_grace{5000};  // SIGTERM -> SIGKILL delay on a graceful kill
  std::size_t result_limit_bytes = 65536;      // stdout bytes returned as the result
  std::size_t stderr_tail_bytes = 4096;        // stderr bytes returned on failure
  std::string user;                            // as configured (name or id); empty: the agent's
  std::string group;                           // as configured; empty: the user's primary group
  bool inherit_env = true;                     // default: true without `user`, false with it
  std::vector<std::string> env_allow;          // agent variables passed when not inheriting
  ResourceLimits limits;
};

// Throws dockhand::sdk::Error(DH_INVALID_ARGUMENT) naming the key ("config/kill_grace_ms: ...").
ProcessConfig parseConfig(std::string_view config_json);

// The JSON Schema of what parseConfig accepts, which the host checks before create(). Two
// rules it leaves to parseConfig: env_allow only goes with inherit_env false, and never names
// one of the agent's own variables. ("dependentRequired" is for independent validators: the
// agent's checker skips it and parseConfig enforces it; "pattern" both check.)
inline constexpr const char* kProcessConfigSchema = R"({
  "type": "object",
  "properties": {
    "kill_grace_ms": {"type": "integer", "minimum": 0, "maximum": 86400000},
    "result_limit_bytes": {"type": "integer", "minimum": 0, "maximum": 1073741824},
    "stderr_tail_bytes": {"type": "integer", "minimum": 0, "maximum": 1073741824},
    "user": {"type": ["string", "integer"], "minLength": 1, "minimum": 0},
    "group": {"type": ["string", "integer"], "minLength": 1, "minimum": 0},
    "inherit_env": {"type": "boolean"},
    "env_allow": {
      "type": "array",
      "items": {"type": "string", "pattern": "^[A-Za-z_][A-Za-z0-9_]*$"}
    },
    "limits": {
      "type": "object",
      "properties": {
        "open_files": {"type": "integer", "minimum": 1, "maximum": 1073741824},
        "processes": {"type": "integer", "minimum": 1, "maximum": 9223372036854775807},
        "address_space_bytes":
            {"type": "integer", "minimum": 16777216, "maximum": 9223372036854775807},
        "core_bytes": {"type": "integer", "minimum": 0, "maximum": 9223372036854775807}
      },
      "additionalProperties": false
    }
  },
  "dependentRequired": {"group": ["user"]},
  "additionalProperties": false
})";

// Who the tasks run as, resolved from the passwd and group databases when the runner is
// created.
struct TaskIdentity {
  uid_t uid = 0;
  gid_t gid = 0;
  std::string name;       // the user's name, or its id when it has no passwd entry
  std::string home;       // "/" when unknown
  bool switches = false;  // differs from the agent's effective uid/gid: setuid/setgid needed
};

// Resolves config.user/config.group for an agent running as `euid`/`egid`. nullopt when no
// user is configured. Throws DH_INVALID_ARGUMENT naming the key: an unknown user or group, or
// a user other than the agent's own while the agent is not root.
std::optional<TaskIdentity> resolveIdentity(const ProcessConfig& config, uid_t euid, gid_t egid);

// Whether an agent variable is the agent's own (DOCKHAND_*, NOTIFY_SOCKET, ...): never
// passed to a task, whatever the environment policy.
bool isAgentPrivateVariable(std::string_view name);

// What launch() needs from task_json and its payload.
struct TaskSpec {
  std::uint64_t task_id = 0;
  std::string work_dir;
  std::string cwd;                                       // absolute
  std::vector<std::string> argv;                         // argv[0] is the program
  bool search_path = false;                              // argv[0] has no '/'
  std::vector<std::pair<std::string, std::string>> env;  // task env, then payload env
};

// Throws dockhand::sdk::Error(DH_INVALID_ARGUMENT) naming the field ("payload/command: ...").
TaskSpec parseTask(std::string_view task_json);

}  // namespace dockhand::plugins::process
