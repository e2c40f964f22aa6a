// AgentSnapshot: the agent's state as /metrics (AgentGauges) and /readyz (notReadyReason) read
// it, typed. Made on the core thread with the status JSON of GET /v1/status (StatusBoard), from
// the same parts at the same moment, so the three never disagree and neither reader parses the
// JSON.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "core/backend.h"
#include "resources/resource_status.h"

namespace dockhand::agent {

struct AgentSnapshot {
  BackendFigures backend;                       // state, tasks, cores, decommission
  std::map<std::string, AddressUse> resources;  // per registered resource
  std::uint64_t blocks = 0;                     // in the block store
  std::uint64_t block_bytes = 0;
  // The first plugin the config requires that did not load: the agent is not ready.
  std::optional<std::string> plugin_not_loaded;
};

}  // namespace dockhand::agent
