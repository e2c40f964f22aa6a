// The agent's exit codes: each distinct, so that a supervisor (systemd, a cluster manager)
// can tell a fate worth a restart from one that is not. `dockhand --help` prints this table
// and docs/operations.md explains what to do about each.
#pragma once

#include <string_view>

namespace dockhand::agent {

enum class ExitCode : int {
  kSuccess = 0,                  // stopped by the driver, or decommission finished
  kInternalError = 1,            // an unexpected failure inside the agent
  kConfigError = 2,              // a config file or option value is invalid (nothing was started)
  kBootstrapFailed = 3,          // could not connect to the driver or fetch the app config
  kRegistrationRefused = 4,      // the driver refused the registration (e.g. duplicate executor id)
  kDriverLost = 5,               // the driver disconnected or stopped answering heartbeats
  kWorkerLost = 6,               // the worker named by --worker-url went away
  kProtocolViolation = 7,        // the driver sent a command that is illegal in the agent's state
  kPluginError = 8,              // a required plugin failed to load or start
  kResourcesUnavailable = 9,     // fewer resources discovered than the profile asks for
  kDecommissionIncomplete = 10,  // decommission deadline passed with blocks not migrated
  kAuthFailed = 11,              // the driver and this agent do not share the cluster secret
  kTaskUnkillable = 12,          // a plugin could not stop what it runs (a task ignored its kill)
  kRestartInPlace = 13,          // asked to restart in place (SIGUSR2) and could not execute itself
  kUsage = 64,                   // unknown option or missing required option (EX_USAGE)
};

struct ExitCodeInfo {
  ExitCode code;
  std::string_view name;
  std::string_view meaning;
};

inline constexpr ExitCodeInfo kExitCodeTable[] = {
    {ExitCode::kSuccess, "success", "stopped by the driver, or decommission finished"},
    {ExitCode::kInternalError, "internal-error", "unexpected failure inside the agent"},
    {ExitCode::kConfigError, "config-error", "invalid config file or option value"},
    {ExitCode::kBootstrapFailed, "bootstrap-failed",
     "could not connect to the driver or fetch the app config"},
    {ExitCode::kRegistrationRefused, "registration-refused", "the driver refused the registration"},
    {ExitCode::kDriverLost, "driver-lost", "the driver disconnected or went silent"},
    {ExitCode::kWorkerLost, "worker-lost", "the worker named by --worker-url went away"},
    {ExitCode::kProtocolViolation, "protocol-violation",
     "the driver sent a command illegal in the agent's state"},
    {ExitCode::kPluginError, "plugin-error", "a required plugin failed to load or start"},
    {ExitCode::kResourcesUnavailable, "resources-unavailable",
     "fewer resources found than requested"},
    {ExitCode::kDecommissionIncomplete, "decommission-incomplete",
     "decommission deadline passed with blocks left"},
    {ExitCode::kAuthFailed, "auth-failed",
     "authentication with the driver failed (no or another cluster secret)"},
    {ExitCode::kTaskUnkillable, "task-unkillable",
     "a plugin could not stop a task (it ignored its kill) and asked the agent to end"},
    {ExitCode::kRestartInPlace, "restart-failed",
     "asked to restart in place (SIGUSR2), it could not execute its program anew; its session "
     "is kept for the next start"},
    {ExitCode::kUsage, "usage", "unknown or missing command-line option"},
};

inline int toInt(ExitCode code) { return static_cast<int>(code); }

}  // namespace dockhand::agent
