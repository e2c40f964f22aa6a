// Agent: what it tells of itself while it runs: the status GET /v1/status, /metrics and /readyz
// serve (made on the core thread, StatusBoard; served from the block server's threads).
#include <utility>

#include "app/agent.h"
#include "dockhand/metrics/metrics.h"
#include "dockhand/metrics/process_stats.h"
#include "resources/resource_status.h"

namespace dockhand::agent {

AgentStatus Agent::served() {
  // Made on the core thread when asked for (an idle agent makes none); a core thread busy
  // for longer than this gets the last one.
  AgentStatus status = status_board_.fresh(
      [this] { loop_.post([this] { status_board_.set(statusNow()); }); }, Millis(500));
  status.snapshot.blocks = store_->count();
  status.snapshot.block_bytes = store_->totalBytes();
  return status;
}

nlohmann::json Agent::servedStatus() {
  AgentStatus status = served();
  status.json["blocks"] = {{"count", status.snapshot.blocks},
                           {"bytes", status.snapshot.block_bytes}};
  status.json["auth"] = {{"required", settings_.secret.has_value()},
                         {"refused_requests", server_ ? server_->authRefusals() : 0}};
  return std::move(status.json);
}

std::string Agent::servedMetrics() {
  gauges_.update(served().snapshot);
  return metrics_->expose() + metrics::processMetricsText();
}

AgentStatus Agent::statusNow() const {
  AgentStatus status;
  status.snapshot.backend = backend_.figures();
  status.snapshot.resources = addressUse(discovery_.found, guard_.ledger());
  status.snapshot.plugin_not_loaded = requiredPluginNotLoaded(plugins_);
  status.json = backend_.statusJson();
  nlohmann::json discovery = nullptr;
  if (discovery_.done) {
    nlohmann::json plugins = nlohmann::json::object();
    for (const auto& [name, details] : discovery_.described) plugins[name] = details;
    discovery = {{"chain", discovery_.chain}, {"plugins", std::move(plugins)}};
  }
  status.json.update({{"resources", resourceStatusJson(discovery_.found, discovery_.amount_per_task,
                                                       guard_.ledger(), discovery_.described)},
                      {"discovery", std::move(discovery)},
                      {"plugins", pluginReport(plugins_)},
                      {"stuck_runners", executor_.stuckRunners()}});
  return status;
}

}  // namespace dockhand::agent
