// DriverService's status page: GET / (HTML), /status.js and /status.css (compiled into the
// binary from driver/status/), and the JSON it polls, GET /v1/cluster (a control request,
// answered under the control API's authentication in driver_service_control.cpp).
#include <algorithm>
#include <chrono>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "dockhand/driver/driver_service.h"
#include "dockhand/driver/report.h"
#include "dockhand/driver/status_assets.h"

namespace dockhand::driver {
namespace {

// The tasks GET /v1/cluster lists at most (the job's counts cover them all): it is polled,
// and built under the scheduler's lock.
constexpr std::size_t kMaxListedTasks = 1000;

std::int64_t toMs(SteadyClock::duration d) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
}

Json decommissionJson(const AgentInfo& agent) {
  if (agent.state != AgentState::kDecommissioning && agent.decommission.is_null()) return nullptr;
  const DecommissionProgress p = parseDecommissionProgress(agent.id, agent.decommission);
  return Json{{"state", p.state.empty() ? "requested" : p.state},
              {"blocks_total", p.blocksTotal()},
              {"blocks_migrated", p.blocks_migrated},
              {"blocks_left", p.blocks_left},
              {"blocks_failed", p.blocks_failed},
              {"bytes_total", p.bytesTotal()},
              {"bytes_migrated", p.bytes_migrated},
              {"bytes_per_s", p.bytes_per_s ? Json(*p.bytes_per_s) : Json()},
              {"eta_ms", p.eta_ms ? Json(*p.eta_ms) : Json()}};
}

Json resourcesJson(const AgentInfo& agent) {
  Json out = Json::object();
  for (const auto& [name, addresses] : agent.resources) {
    Json in_use = Json::array();
    const auto free = agent.free_units.find(name);
    for (std::size_t i = 0; i < addresses.size(); ++i) {
      if (free != agent.free_units.end() && i < free->second.size() &&
          free->second[i] < kResourceUnits) {
        in_use.push_back(addresses[i]);
      }
    }
    out[name] = Json{{"addresses", addresses}, {"in_use", std::move(in_use)}};
  }
  return out;
}

std::string metricsUrl(std::string block_url) {
  if (block_url.empty()) return "";
  while (!block_url.empty() && block_url.back() == '/') block_url.pop_back();
  block_url += "/metrics";
  return block_url;
}

// `page` with each "{{name}}" of `values` replaced by its (already escaped) value.
std::string fillIn(std::string_view page,
                   std::initializer_list<std::pair<std::string_view, std::string>> values) {
  std::string out(page);
  for (const auto& [name, value] : values) {
    std::string mark = "{{";
    mark += name;
    mark += "}}";
    for (auto at = out.find(mark); at != std::string::npos;
         at = out.find(mark, at + value.size())) {
      out.replace(at, mark.size(), value);
    }
  }
  return out;
}

HttpReply asset(const char* content_type, std::string_view body) {
  HttpReply reply{200, content_type, std::string(body), {}};
  reply.headers.emplace_back("Cache-Control", "no-cache");
  reply.headers.emplace_back("X-Content-Type-Options", "nosniff");
  return reply;
}

}  // namespace

Json DriverService::clusterJson() const {
  std::lock_guard lock(mutex_);
  const TimePoint now = now_();
  // One pass over the blocks for every agent, not one per agent (1,000 agents poll-listed).
  const auto held = scheduler_.blocks().countByHolder();
  Json agents = Json::array();
  for (const auto& [id, agent] : scheduler_.agents()) {
    Json entry = agentSummaryJson(agent, held.of(id), now);
    entry.update({{"resources", resourcesJson(agent)},
                  {"tasks_finished", agent.tasks_finished},
                  {"tasks_failed", agent.tasks_failed},
                  {"metrics_url", metricsUrl(agent.block_url)},
                  {"log_urls", agent.log_urls},
                  {"registered_ms_ago", toMs(now - agent.registered_at)},
                  {"last_seen_ms_ago", toMs(now - agent.last_seen)},
                  {"disconnect_reason", agent.disconnect_reason},
                  {"decommission", decommissionJson(agent)}});
    agents.push_back(std::move(entry));
  }
  // At most kMaxListedTasks, running and failed ones first, listed in job order.
  const std::vector<TaskRecord>& records = scheduler_.tasks();
  std::vector<std::size_t> listed;
  for (int pass = 0; pass < 2; ++pass) {
    for (std::size_t i = 0; i < records.size() && listed.size() < kMaxListedTasks; ++i) {
      const TaskOutcome o = records[i].outcome;
      const bool first =
          o == TaskOutcome::kRunning || o == TaskOutcome::kFailed || o == TaskOutcome::kKilled;
      if (first == (pass == 0)) listed.push_back(i);
    }
  }
  std::sort(listed.begin(), listed.end());
  Json tasks = Json::array();
  for (std::size_t i : listed) {
    const TaskRecord& t = records[i];
    Json duration = nullptr;
    if (t.outcome == TaskOutcome::kRunning) {
      duration = toMs(now - t.launched_at);
    } else if (t.launches > 0 && t.outcome != TaskOutcome::kPending) {
      duration = t.duration.count();
    }
    Json earlier = Json::array();
    for (const EarlierAttempt& a : t.earlier) {
      earlier.push_back({{"task_id", a.task_id},
                         {"executor_id", a.agent_id},
                         {"started_ms_ago", toMs(now - a.launched_at)},
                         {"duration_ms", a.duration.count()},
                         {"state", a.state}});
    }
    tasks.push_back({{"name", t.spec.name},
                     {"state", std::string(toString(t.outcome))},
                     {"task_id", t.task_id},
                     {"executor_id", t.agent_id},
                     {"attempts", t.launches},
                     {"duration_ms", std::move(duration)},
                     {"reason", t.reason},
                     {"log_urls", t.log_urls},
                     {"metrics", protocol::toJson(t.metrics)},
                     {"started_ms_ago", t.launches > 0 ? Json(toMs(now - t.launched_at)) : Json()},
                     {"earlier_attempts", std::move(earlier)}});
  }
  const Progress progress = scheduler_.progress();
  Json job = nullptr;
  if (scheduler_.jobState() != JobState::kNone) {
    job = Json{{"name", scheduler_.job().name},
               {"state", std::string(toString(scheduler_.jobState()))},
               {"failure_reason", scheduler_.failureReason()},
               {"total", progress.total},
               {"finished", progress.finished},
               {"running", progress.running},
               {"pending", progress.pending},
               {"failed", progress.failed},
               {"retries", progress.retries},
               {"tasks_omitted", records.size() - listed.size()},
               {"tasks", std::move(tasks)},
               {"agent_peaks", agentPeaksJson(scheduler_.jobAgentPeaks())}};
  }
  return Json{{"driver", {{"software", driverSoftware()}}},
              {"executors", std::move(agents)},
              {"blocks", scheduler_.blocks().size()},
              {"fallback_blocks", held.fallback},
              {"external_blocks", held.external},
              {"job", std::move(job)},
              {"auth", {{"required", config_.secret.has_value()}}}};
}

std::optional<HttpReply> DriverService::statusPageRequest(const ControlRequest& request) const {
  const std::string& path = request.path;
  if (path != "/" && path != "/index.html" && path != "/status.js" && path != "/status.css" &&
      path != "/favicon.ico") {
    return std::nullopt;
  }
  if (request.method != "GET") {
    std::string why = "use GET ";
    why += path;
    why += "\n";
    return HttpReply{405, "text/plain", why, {{"Allow", "GET"}}};
  }
  if (path == "/status.js") return asset("text/javascript; charset=utf-8", kStatusJs);
  if (path == "/status.css") return asset("text/css; charset=utf-8", kStatusCss);
  if (path == "/favicon.ico") return HttpReply{204, "image/x-icon", "", {}};
  // The page itself carries no cluster data: only whether requests must be signed.
  HttpReply page = asset("text/html; charset=utf-8",
                         fillIn(kStatusHtml, {{"auth", config_.secret ? "required" : "off"},
                                              {"software", htmlEscape(driverSoftware())}}));
  // Everything the page runs and loads comes from this driver; it fetches /v1/cluster only.
  page.headers.emplace_back("Content-Security-Policy",
                            "default-src 'none'; script-src 'self'; style-src 'self'; "
                            "connect-src 'self'; img-src 'self'; base-uri 'none'; "
                            "form-action 'none'; frame-ancestors 'none'");
  page.headers.emplace_back("Referrer-Policy", "no-referrer");
  return page;
}

}  // namespace dockhand::driver
