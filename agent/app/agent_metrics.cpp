#include "app/agent_metrics.h"

#include <array>
#include <string>

namespace dockhand::agent {
namespace {

using Json = nlohmann::json;

// The agent states of /v1/status's "state" (Backend's, and "decommissioning").
constexpr std::array<const char*, 7> kStates = {"idle",           "connecting", "fetching-config",
                                                "registering",    "running",    "stopping",
                                                "decommissioning"};
// The phases of /v1/status's "decommission.state", and "inactive" when there is none.
constexpr std::array<const char*, 6> kPhases = {
    "inactive", "waiting-for-tasks", "migrating", "finishing", "finished", "deadline-passed"};

double number(const Json& object, const char* key) {
  if (!object.is_object()) return 0;
  auto it = object.find(key);
  return it != object.end() && it->is_number() ? it->get<double>() : 0;
}

std::string text(const Json& object, const char* key) {
  if (!object.is_object()) return {};
  auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : std::string();
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
  update(Json::object());
}

void AgentGauges::update(const Json& status) {
  const std::string state = text(status, "state");
  for (const char* known : kStates) state_.labels({known}).set(state == known ? 1 : 0);
  running_tasks_.set(number(status, "running_tasks"));
  waiting_tasks_.set(number(status, "waiting_tasks"));
  const Json cores = status.is_object() ? status.value("cores", Json()) : Json();
  cores_.set(number(cores, "total"));
  cores_in_use_.set(number(cores, "in_use"));

  const Json resources = status.is_object() ? status.value("resources", Json()) : Json();
  if (resources.is_object()) {
    for (const auto& [name, resource] : resources.items()) {
      if (!resource.is_object()) continue;
      double total = 0;
      double in_use = 0;
      if (auto addresses = resource.find("addresses");
          addresses != resource.end() && addresses->is_array()) {
        total = static_cast<double>(addresses->size());
      }
      if (auto allocation = resource.find("allocation");
          allocation != resource.end() && allocation->is_object()) {
        for (const auto& [address, held] : allocation->items()) {
          auto holders = held.is_object() ? held.find("held_by") : held.end();
          if (held.is_object() && holders != held.end() && holders->is_array() &&
              !holders->empty()) {
            ++in_use;
          }
        }
      }
      addresses_.labels({name}).set(total);
      addresses_in_use_.labels({name}).set(in_use);
    }
  }

  const Json blocks = status.is_object() ? status.value("blocks", Json()) : Json();
  blocks_.set(number(blocks, "count"));
  block_bytes_.set(number(blocks, "bytes"));

  const Json decommission = status.is_object() ? status.value("decommission", Json()) : Json();
  const std::string phase = decommission.is_object() ? text(decommission, "state") : "inactive";
  for (const char* known : kPhases) phase_.labels({known}).set(phase == known ? 1 : 0);
  decommission_blocks_.labels({"migrated"}).set(number(decommission, "blocks_migrated"));
  decommission_blocks_.labels({"left"}).set(number(decommission, "blocks_left"));
  decommission_blocks_.labels({"failed"}).set(number(decommission, "blocks_failed"));
  decommission_bytes_.labels({"migrated"}).set(number(decommission, "bytes_migrated"));
  decommission_bytes_.labels({"left"}).set(number(decommission, "bytes_left"));
  decommission_rate_.set(number(decommission, "bytes_per_s"));
  decommission_eta_.set(number(decommission, "eta_ms") / 1000.0);
}

}  // namespace dockhand::agent
