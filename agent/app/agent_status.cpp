// Agent: what it tells of itself while it runs: the status GET /v1/status, /metrics and /readyz
// serve (made on the core thread, StatusBoard; served from the block server's threads).
#include <utility>

#include "app/agent.h"
#include "dockhand/metrics/metrics.h"
#include "dockhand/metrics/process_stats.h"

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
  status.snapshot.resources = discovery_.use();
  status.snapshot.plugin_not_loaded = requiredPluginNotLoaded(plugins_);
  status.json = backend_.statusJson(status.snapshot.backend);
  status.json.update({{"resources", discovery_.resourcesJson()},
                      {"discovery", discovery_.discoveryJson()},
                      {"plugins", pluginReport(plugins_)},
                      {"stuck_runners", executor_.stuckRunners()}});
  return status;
}

}  // namespace dockhand::agent
