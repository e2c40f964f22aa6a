#include "app/agent_metrics.h"

#include <array>
#include <string>

namespace dockhand::agent {
namespace {

// The agent states of /v1/status's "state" (Backend's, and "decommissioning").
constexpr std::array<const char*, 7> kStates = {"idle",           "connecting", "fetching-config",
                                                "registering",    "running",    "stopping",
                                                "decommissioning"};
// The phases of /v1/status's "decommission.state", and "inactive" when there is none.
constexpr std::array<const char*, 6> kPhases = {
    "inactive", "waiting-for-tasks", "migrating", "finishing", "finished", "deadline-passed"};

template <class Number>
double asDouble(Number n) {
  return static_cast<double>(n);
}

}  // namespace

AgentGauges::AgentGauges(metrics::Registry& registry)
    : state_(registry.gauge("dockhand_agent_state",
                            "1 for the agent's current state (as GET /v1/status says it), 0 for "
                            "the others.",
                            {"state"})),
      running_tasks_(
          registry.gauge("dockhand_tasks_running", "Tasks running on this agent.").get()),
      waiting_tasks_(registry
                         .gauge("dockhand_tasks_waiting",
                                "Tasks sent to this agent that wait for cores (launch_ahead).")
                         .get()),
      cores_(registry.gauge("dockhand_cores", "Cores this agent offers (its --cores).").get()),
      cores_in_use_(
          registry.gauge("dockhand_cores_in_use", "Cores the running tasks asked for (their cpus).")
              .get()),
      addresses_(registry.gauge("dockhand_resource_addresses",
                                "Addresses of each resource (GPUs, ...) this agent registered.",
                                {"resource"})),
      addresses_in_use_(registry.gauge("dockhand_resource_addresses_in_use",
                                       "Addresses of each resource held by a running task.",
                                       {"resource"})),
      blocks_(
          registry.gauge("dockhand_blocks_stored", "Blocks in this agent's block store.").get()),
      block_bytes_(registry
                       .gauge("dockhand_blocks_stored_bytes",
                              "Bytes of the blocks in this agent's block store.")
                       .get()),
      phase_(registry.gauge("dockhand_decommission_phase",
                            "1 for the decommission's current phase (inactive when none runs), 0 "
                            "for the others.",
                            {"phase"})),
      decommission_blocks_(registry.gauge(
          "dockhand_decommission_blocks",
          "Blocks of this agent's decommission: migrated, left to move and failed (state).",
          {"state"})),
      decommission_bytes_(registry.gauge(
          "dockhand_decommission_bytes",
          "Bytes of this agent's decommission: migrated and left to move (state).", {"state"})),
      decommission_rate_(registry
                             .gauge("dockhand_decommission_bytes_per_second",
                                    "The rate this agent's decommission has moved bytes at since "
                                    "its first migration pass began (0 before it moved any).")
                             .get()),
      decommission_eta_(registry
                            .gauge("dockhand_decommission_eta_seconds",
                                   "How long the bytes left to move take at that rate (0 when "
                                   "it cannot tell yet, or none are left).")
                            .get()) {
  // Every state and phase is exposed from the start, so that a query for one finds a 0.
  for (const char* state : kStates) state_.labels({state});
  for (const char* phase : kPhases) phase_.labels({phase});
  for (const char* state : {"migrated", "left", "failed"}) decommission_blocks_.labels({state});
  for (const char* state : {"migrated", "left"}) decommission_bytes_.labels({state});
  update(AgentSnapshot{});
}

void AgentGauges::update(const AgentSnapshot& snapshot) {
  const BackendFigures& backend = snapshot.backend;
  for (const char* known : kStates) state_.labels({known}).set(backend.state == known ? 1 : 0);
  running_tasks_.set(asDouble(backend.running_tasks));
  waiting_tasks_.set(asDouble(backend.waiting_tasks));
  cores_.set(backend.cores);
  cores_in_use_.set(backend.cores_in_use);
  for (const auto& [name, use] : snapshot.resources) {
    addresses_.labels({name}).set(asDouble(use.total));
    addresses_in_use_.labels({name}).set(asDouble(use.in_use));
  }
  blocks_.set(asDouble(snapshot.blocks));
  block_bytes_.set(asDouble(snapshot.block_bytes));

  const protocol::DecommissionProgress none;
  const protocol::DecommissionProgress& d = backend.decommission ? *backend.decommission : none;
  const std::string phase = backend.decommission ? d.state : "inactive";
  for (const char* known : kPhases) phase_.labels({known}).set(phase == known ? 1 : 0);
  decommission_blocks_.labels({"migrated"}).set(asDouble(d.blocks_migrated));
  decommission_blocks_.labels({"left"}).set(asDouble(d.blocks_left));
  decommission_blocks_.labels({"failed"}).set(asDouble(d.blocks_failed));
  decommission_bytes_.labels({"migrated"}).set(asDouble(d.bytes_migrated));
  decommission_bytes_.labels({"left"}).set(asDouble(d.bytes_left));
  decommission_rate_.set(asDouble(d.bytes_per_s.value_or(0)));
  decommission_eta_.set(asDouble(d.eta_ms.value_or(0)) / 1000.0);
}

}  // namespace dockhand::agent
