// DriverService's control API: GET /v1/executors, GET /v1/cluster (built in
// driver_service_status.cpp) and POST /v1/executors/<id>/decommission on the agents' HTTP
// server, each request checked against the cluster secret when there is one.
// Runs on AgentServer's pool threads; the scheduler is read and changed under mutex_.
#include "dockhand/driver/driver_service.h"

#include <algorithm>
#include <chrono>
#include <string>
#include <string_view>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "dockhand/base/logging.h"
#include "dockhand/metrics/process_stats.h"

namespace dockhand::driver {
namespace {

HttpReply jsonReply(int status, const Json& body) {
  return HttpReply{status, "application/json", body.dump() + "\n", {}};
}

HttpReply errorReply(int status, const std::string& message) {
  return jsonReply(status, Json{{"error", message}});
}

}  // namespace

Json DriverService::agentSummaryJson(const AgentInfo& agent, std::size_t blocks, TimePoint now) {
  // A held agent is shown as what the operator must know first: it is away, and may be back.
  Json disconnected_for = nullptr;
  if (agent.disconnected_since) {
    disconnected_for =
        std::chrono::duration_cast<std::chrono::milliseconds>(now - *agent.disconnected_since)
            .count();
  }
  return Json{{"executor_id", agent.id},
              {"host", agent.host},
              {"state", std::string(reportedState(agent))},
              {"connected", !agent.disconnected_since},
              {"disconnected_for_ms", std::move(disconnected_for)},
              {"cores", agent.cores},
              {"free_cores", std::clamp(agent.free_cores - agent.ahead, 0, agent.cores)},
              {"running_tasks", agent.running},
              {"tasks_launched", agent.tasks_launched},
              {"block_url", agent.block_url},
              {"blocks", blocks},
              {"metrics", protocol::toJson(agent.metrics)}};
}

Json DriverService::executorsJson() const {
  std::lock_guard lock(mutex_);
  const auto held = scheduler_.blocks().countByHolder();
  const TimePoint now = now_();
  Json list = Json::array();
  for (const auto& [id, agent] : scheduler_.agents()) {
    Json entry = agentSummaryJson(agent, held.of(id), now);
    entry["decommission"] = agent.decommission;
    list.push_back(std::move(entry));
  }
  return Json{
      {"executors", std::move(list)},
      {"fallback_blocks", held.fallback},
      {"external_blocks", held.external},
      {"blocks", scheduler_.blocks().size()},
      {"auth", {{"required", config_.secret.has_value()}, {"failures", metrics_.authFailures()}}}};
}

std::string DriverService::metricsText() {
  {
    std::lock_guard lock(mutex_);
    metrics_.setGauges(scheduler_);
  }
  return registry_.expose() + metrics::processMetricsText();
}

std::optional<HttpReply> DriverService::onHttpRequest(const ControlRequest& request) {
  if (request.path == "/metrics") {
    if (request.method != "GET") return errorReply(405, "use GET /metrics");
    return HttpReply{200, metrics::kContentType, metricsText(), {}};
  }
  if (auto page = statusPageRequest(request)) return page;
  if (request.path.rfind("/v1/", 0) != 0) return std::nullopt;
  std::optional<HttpReply> reply = controlRequest(request);
  if (reply) metrics_.controlRequest(request.method, reply->status);
  return reply;
}

std::optional<HttpReply> DriverService::controlRequest(const ControlRequest& request) {
  constexpr std::string_view kExecutors = "/v1/executors";
  constexpr std::string_view kDecommission = "/decommission";
  const std::string& method = request.method;
  const std::string& path = request.path;
  const std::string& body = request.body;
  if (control_verifier_) {
    auto verdict = control_verifier_->verify(
        request.authorization,
        protocol::auth::RequestToSign{.method = method, .path = path, .content = body},
        protocol::auth::wallClockMs());
    if (!verdict) {
      const std::string& why = verdict.error().message;
      metrics_.authFailure();
      logger("driver")->warn("control request {} {} refused: {}", method, path, why);
      HttpReply reply = errorReply(401, why);
      reply.headers.emplace_back("WWW-Authenticate", std::string(protocol::auth::kHeaderScheme));
      return reply;
    }
  }
  try {
    if (path == kExecutors || path == std::string(kExecutors) + "/") {
      if (method != "GET") return errorReply(405, "use GET /v1/executors");
      return jsonReply(200, executorsJson());
    }
    if (path == "/v1/cluster") {
      if (method != "GET") return errorReply(405, "use GET /v1/cluster");
      return jsonReply(200, clusterJson());
    }
    // "/v1/executors/<id>/decommission"
    const std::string prefix = std::string(kExecutors) + "/";
    if (path.size() > prefix.size() + kDecommission.size() && path.rfind(prefix, 0) == 0 &&
        path.compare(path.size() - kDecommission.size(), kDecommission.size(), kDecommission) ==
            0) {
      const std::string id =
          path.substr(prefix.size(), path.size() - prefix.size() - kDecommission.size());
      if (method != "POST") return errorReply(405, "use POST /v1/executors/<id>/decommission");
      std::string reason = "requested through the control API";
      if (!body.empty()) {
        Json parsed = Json::parse(body, nullptr, /*allow_exceptions=*/false);
        if (parsed.is_object() && parsed.contains("reason") && parsed["reason"].is_string()) {
          reason = parsed["reason"].get<std::string>();
        }
      }
      if (!decommission(id, reason)) {
        return errorReply(404, fmt::format("no executor '{}' is registered", id));
      }
      return jsonReply(200, Json{{"executor_id", id}, {"decommissioning", true}});
    }
    return errorReply(404, fmt::format("no such resource: {}", path));
  } catch (const std::exception& e) {
    return errorReply(500, e.what());
  }
}

}  // namespace dockhand::driver
