// Agent: what it tells of itself while it runs: the status board GET /v1/status and /metrics
// read from (made on the core thread, served from the block server's threads).
#include <utility>

#include "app/agent.h"
#include "dockhand/metrics/metrics.h"
#include "dockhand/metrics/process_stats.h"
#include "resources/resource_status.h"

namespace dockhand::agent {

void Agent::StatusBoard::set(nlohmann::json status) {
  {
    std::lock_guard lock(mutex_);
    status_ = std::move(status);
    requested_ = false;
    ++generation_;
  }
  changed_.notify_all();
}

nlohmann::json Agent::StatusBoard::fresh(const std::function<void()>& request, Millis wait) {
  std::unique_lock lock(mutex_);
  if (closed_) return status_;
  const std::uint64_t seen = generation_;
  if (!requested_) {
    requested_ = true;
    lock.unlock();
    request();
    lock.lock();
  }
  changed_.wait_for(lock, wait, [&] { return generation_ != seen || closed_; });
  return status_;
}

void Agent::StatusBoard::close() {
  {
    std::lock_guard lock(mutex_);
    closed_ = true;
  }
  changed_.notify_all();
}

nlohmann::json Agent::servedStatus() {
  // Made on the core thread when asked for (an idle agent makes none); a core thread busy
  // for longer than this gets the last one.
  nlohmann::json status = status_board_.fresh(
      [this] { loop_.post([this] { status_board_.set(statusJson()); }); }, Millis(500));
  status["blocks"] = {{"count", store_->count()}, {"bytes", store_->totalBytes()}};
  status["auth"] = {{"required", settings_.secret.has_value()},
                    {"refused_requests", server_ ? server_->authRefusals() : 0}};
  return status;
}

std::string Agent::servedMetrics() {
  gauges_.update(servedStatus());
  return metrics_->expose() + metrics::processMetricsText();
}

nlohmann::json Agent::statusJson() const {
  nlohmann::json status = backend_.statusJson();
  nlohmann::json discovery = nullptr;
  if (discovery_.done) {
    nlohmann::json plugins = nlohmann::json::object();
    for (const auto& [name, details] : discovery_.described) plugins[name] = details;
    discovery = {{"chain", discovery_.chain}, {"plugins", std::move(plugins)}};
  }
  status.update({{"resources", resourceStatusJson(discovery_.found, discovery_.amount_per_task,
                                                  guard_.ledger(), discovery_.described)},
                 {"discovery", std::move(discovery)},
                 {"plugins", pluginReport(plugins_)},
                 {"stuck_runners", executor_.stuckRunners()}});
  return status;
}

}  // namespace dockhand::agent
