// Small rules the process runner's files share: how its JSON goes to the host, and how it
// watches a process. Header-only; no state.
#pragma once

#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

#include <string>

#include <nlohmann/json.hpp>

namespace dockhand::plugins::process {

// JSON text for the host; task output is arbitrary bytes: what is not UTF-8 is replaced
// instead of throwing.
inline std::string dumpJson(const nlohmann::json& value) {
  return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// A pidfd for `pid` (readable once it exited), or -1 with errno set.
inline int pidfdOpen(pid_t pid) { return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)); }

}  // namespace dockhand::plugins::process
