// Readiness: whether the agent should be sent work (GET /readyz on its block server), read from
// its snapshot (AgentSnapshot, made with the status of GET /v1/status). Ready when it is registered
// with the driver and running, and every required plugin is loaded; not ready while it starts,
// decommissions or stops, so that a load balancer or a Kubernetes readiness probe stops sending it
// work. docs/operations.md#health-and-readiness.
//
// Pure: the block server's threads call it with their own copy of the snapshot.
#pragma once

#include <optional>
#include <string>

#include "app/agent_snapshot.h"

namespace dockhand::agent {

// nullopt when ready; otherwise why not, in a few words ("decommissioning", "registering",
// "required plugin 'process' is not loaded").
std::optional<std::string> notReadyReason(const AgentSnapshot& snapshot);

}  // namespace dockhand::agent
