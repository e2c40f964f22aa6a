// GET /metrics of real agents and a real driver after a job with finished tasks, a failed
// attempt, a plugin call that timed out (the hang-launch fixture runner) and a decommission:
// Prometheus' own checker (promtool, Debian's `prometheus` package) accepts every scrape, and
// the counters agree with each other and with the driver's report.
#include <signal.h>
#include <stdio.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "support/agent_command.h"
#include "support/http_client.h"
#include "support/process.h"

namespace dockhand::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using std::chrono_literals::operator""s;
using ::testing::HasSubstr;

constexpr char kPromtool[] = "/usr/bin/promtool";

// Every sample of an exposition: "name{labels}" (as written) -> value.
std::map<std::string, double> samples(const std::string& text) {
  std::map<std::string, double> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    const auto space = line.rfind(' ');
    if (space == std::string::npos) continue;
    out[line.substr(0, space)] = std::stod(line.substr(space + 1));
  }
  return out;
}

double value(const std::map<std::string, double>& samples, const std::string& key) {
  auto it = samples.find(key);
  return it == samples.end() ? -1 : it->second;
}

// What `promtool check metrics` says of `text`: nullopt when it accepts it without a finding.
std::optional<std::string> promtoolFindings(const fs::path& dir, const std::string& text) {
  const fs::path file = dir / "scrape.txt";
  writeFile(file, text);
  const std::string command =
      std::string(kPromtool) + " check metrics < '" + file.string() + "' 2>&1";
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return "cannot run promtool";
  std::string output;
  char buffer[512];
  while (std::fgets(buffer, sizeof buffer, pipe) != nullptr) output += buffer;
  const int status = ::pclose(pipe);
  if (status == 0 && output.empty()) return std::nullopt;
  return "exit status " + std::to_string(status) + ": " + output;
}

class MetricsTest : public ::testing::Test {
 protected:
  // Four quick tasks, one that fails its first attempt, and one whose launch() never
  // returns in the hang-launch runner (its two attempts fail, and with them the job).
  fs::path writeJob() {
    const fs::path marker = dir.path() / "failed-once";
    json tasks = json::array();
    for (int i = 0; i < 4; ++i) {
      tasks.push_back({{"name", "quick-" + std::to_string(i)}, {"shell", "echo 1"}});
    }
    tasks.push_back({{"name", "fail-once"},
                     {"shell", "if [ -e '" + marker.string() + "' ]; then echo 1; else touch '" +
                                   marker.string() + "'; exit 3; fi"}});
    tasks.push_back({{"name", "hang"}, {"runner", "hang-launch"}, {"payload", {{"hang", true}}}});
    fs::path job = dir.path() / "job.json";
    writeFile(job, json{{"name", "metrics"}, {"max_attempts", 2}, {"tasks", tasks}}.dump(2));
    return job;
  }

  fs::path writeAgentConfig() {
    fs::path config = dir.path() / "agent.json";
    writeFile(config, json{{"plugins", {{{"name", "process"}}, {{"path", DOCKHAND_HANG_LAUNCH}}}},
                           {"plugin_manifest_dir", (dir.path() / "no-manifests").string()},
                           {"plugin_call_timeout_ms", 1500},
                           {"stop_grace_ms", 1000},
                           {"block_port", 0},
                           {"fallback_dir", (dir.path() / "fallback").string()},
                           {"decommission",
                            {{"enabled", true},
                             {"migration", {"fallback"}},
                             {"deadline_ms", 30000},
                             {"check_interval_ms", 100}}}}
                          .dump(2));
    fs::create_directories(dir.path() / "fallback");
    return config;
  }

  std::unique_ptr<ChildProcess> startAgent(const std::string& id, const fs::path& config) {
    const AgentCommand command{.config = config,
                               .driver_url = "ws://127.0.0.1:" + std::to_string(port_) + "/",
                               .executor_id = id,
                               .app_id = "metrics-test",
                               .work_dir = dir.path() / ("work-" + id)};
    return std::make_unique<ChildProcess>(command.argv(), (dir.path() / (id + ".log")).string());
  }

  std::string driverUrl() const { return "http://127.0.0.1:" + std::to_string(port_); }

  // executor id -> block_url, from the driver's control API.
  std::map<std::string, std::string> blockUrls() {
    std::map<std::string, std::string> out;
    HttpReply reply = httpGet(driverUrl() + "/v1/executors");
    json parsed = json::parse(reply.body, nullptr, false);
    if (parsed.is_discarded() || !parsed.contains("executors")) return out;
    for (const auto& e : parsed["executors"]) out[e["executor_id"]] = e["block_url"];
    return out;
  }

  // A scrape, checked by promtool when it is installed.
  std::string scrape(const std::string& url) {
    HttpReply reply = httpGet(url + "/metrics");
    EXPECT_EQ(reply.status, 200) << url;
    if (fs::exists(kPromtool)) {
      auto findings = promtoolFindings(dir.path(), reply.body);
      EXPECT_FALSE(findings.has_value()) << url << "/metrics: " << *findings << "\n" << reply.body;
    }
    return reply.body;
  }

  std::string logs() const {
    std::string out = "\n--- driver:\n" + (driver_ ? driver_->output() : std::string());
    for (const auto& [id, agent] : agents_) out += "\n--- " + id + ":\n" + agent->output();
    return out;
  }

  TempDir dir;
  int port_ = 0;
  std::unique_ptr<ChildProcess> driver_;
  std::map<std::string, std::unique_ptr<ChildProcess>> agents_;
};

TEST_F(MetricsTest, ScrapesPassPromtoolAndCountersMatchTheDriversReport) {
  const fs::path port_file = dir.path() / "port";
  const fs::path driver_config = dir.path() / "driver.json";
  writeFile(driver_config, R"({"heartbeat_interval_ms": 300})");
  driver_ = std::make_unique<ChildProcess>(
      std::vector<std::string>{driverBinary(), "run", writeJob().string(), "--local-agents", "0",
                               "--min-agents", "2", "--timeout", "120", "--linger", "120",
                               "--listen", "127.0.0.1:0", "--port-file", port_file.string(),
                               "--log-level", "info", "--config", driver_config.string()},
      (dir.path() / "driver.log").string());
  ASSERT_TRUE(waitUntil([&] { return fs::exists(port_file); }, 10s)) << logs();
  port_ = std::stoi(readFile(port_file));
  const fs::path config = writeAgentConfig();
  for (const char* id : {"agent-a", "agent-b"}) agents_[id] = startAgent(id, config);

  // The report is out (the job fails: the hang task's two attempts did), and the driver
  // lingers with the agents still registered.
  ASSERT_TRUE(waitUntil(
      [&] { return driver_->output().find("job metrics FAILED") != std::string::npos; }, 90s))
      << logs();
  std::smatch m;
  const std::string out = driver_->output();
  ASSERT_TRUE(std::regex_search(
      out, m,
      std::regex(R"((\d+) tasks, (\d+) finished, (\d+) failed, \d+ not run; (\d+) retries)")))
      << out;
  const int finished = std::stoi(m[2]);
  const int failed_tasks = std::stoi(m[3]);
  const int retries = std::stoi(m[4]);
  EXPECT_EQ(finished, 5) << out;
  EXPECT_EQ(failed_tasks, 1) << out;

  const auto urls = blockUrls();
  ASSERT_EQ(urls.size(), 2U) << logs();
  // The agents' gauges follow their status, refreshed every 250 ms: wait for the last task's
  // end to show.
  for (const auto& entry : urls) {
    const std::string& url = entry.second;
    EXPECT_TRUE(waitUntil(
        [&] {
          return value(samples(httpGet(url + "/metrics").body), "dockhand_tasks_running") == 0;
        },
        10s))
        << entry.first << logs();
  }
  std::map<std::string, std::map<std::string, double>> agent;
  for (const auto& [id, url] : urls) agent[id] = samples(scrape(url));
  const auto driver = samples(scrape(driverUrl()));

  auto agent_sum = [&](const std::string& key) {
    double sum = 0;
    for (const auto& [id, s] : agent) sum += std::max(0.0, value(s, key));
    return sum;
  };
  // Every final status an agent sent, the driver took; and they are the report's.
  for (const char* state : {"FINISHED", "FAILED", "KILLED", "LOST"}) {
    const std::string label = std::string("{state=\"") + state + "\"}";
    EXPECT_EQ(value(driver, "dockhand_driver_task_ends_total" + label),
              agent_sum("dockhand_tasks_ended_total" + label))
        << state << logs();
  }
  EXPECT_EQ(value(driver, "dockhand_driver_task_ends_total{state=\"FINISHED\"}"), finished);
  // A failed attempt is retried, or it is the last of a task that failed.
  EXPECT_EQ(value(driver, "dockhand_driver_task_ends_total{state=\"FAILED\"}"),
            retries + failed_tasks)
      << out;
  EXPECT_EQ(value(driver, "dockhand_driver_task_launches_total"),
            agent_sum("dockhand_tasks_started_total"));
  EXPECT_EQ(agent_sum("dockhand_tasks_running"), 0);
  EXPECT_EQ(value(driver, "dockhand_driver_agents{state=\"active\"}"), 2);
  EXPECT_EQ(value(driver, "dockhand_driver_tasks{state=\"FINISHED\"}"), finished);
  EXPECT_EQ(value(driver, "dockhand_driver_tasks{state=\"FAILED\"}"), failed_tasks);
  EXPECT_GT(value(driver, "dockhand_driver_heartbeats_total"), 0);
  EXPECT_EQ(value(driver, "dockhand_driver_scheduling_latency_seconds_count"),
            value(driver, "dockhand_driver_task_launches_total"));
  // The hang task's first launch() overran plugin_call_timeout_ms and made its runner stuck
  // on that agent (a second attempt may have done the same on the other).
  const std::string hang = R"({plugin="hang-launch",hook="launch"})";
  EXPECT_GE(agent_sum("dockhand_plugin_call_timeouts_total" + hang), 1) << logs();
  EXPECT_EQ(agent_sum("dockhand_plugin_call_timeouts_total" + hang),
            agent_sum("dockhand_plugin_stuck{plugin=\"hang-launch\"}"));
  // The process runner's launches returned: one per task it ran.
  EXPECT_EQ(agent_sum("dockhand_plugin_calls_total{plugin=\"process\",hook=\"launch\"}"),
            agent_sum("dockhand_tasks_ended_total{state=\"FINISHED\"}") + 1)  // fail-once's FAILED
      << logs();
  EXPECT_EQ(agent_sum("dockhand_task_duration_seconds_count"),
            agent_sum("dockhand_tasks_started_total"));
  for (const auto& [id, s] : agent) {
    EXPECT_EQ(value(s, "dockhand_driver_link_connected"), 1) << id;
    EXPECT_EQ(value(s, "dockhand_driver_link_frames_received_total{type=\"LaunchTask\"}"),
              value(s, "dockhand_tasks_started_total"))
        << id;
    EXPECT_EQ(value(s, "dockhand_cores"), 2) << id;
    EXPECT_EQ(value(s, "dockhand_agent_state{state=\"running\"}"), 1) << id;
    EXPECT_EQ(value(s, "dockhand_decommission_phase{phase=\"inactive\"}"), 1) << id;
  }

  // A decommission through the control API: agent-a leaves, the driver counts one agent.
  ChildProcess command(
      {driverBinary(), "decommission", "agent-a", "--driver", "127.0.0.1:" + std::to_string(port_)},
      (dir.path() / "command.log").string());
  EXPECT_EQ(command.waitExit(15s), 0) << command.output();
  EXPECT_EQ(agents_["agent-a"]->waitExit(60s), 0) << logs();
  ASSERT_TRUE(waitUntil(
      [&] {
        const auto now = samples(httpGet(driverUrl() + "/metrics").body);
        return value(now, "dockhand_driver_agents{state=\"active\"}") == 1 &&
               value(now, "dockhand_driver_agents{state=\"decommissioning\"}") == 0;
      },
      15s))
      << logs();
  const auto after = samples(scrape(driverUrl()));
  EXPECT_EQ(value(after, "dockhand_driver_control_requests_total{method=\"POST\",code=\"200\"}"),
            1);
  const auto b = samples(scrape(urls.at("agent-b")));
  EXPECT_EQ(value(b, "dockhand_agent_state{state=\"running\"}"), 1);

  driver_->signal(SIGTERM);
  EXPECT_TRUE(driver_->waitExit(30s).has_value()) << logs();
  if (!fs::exists(kPromtool)) {
    GTEST_SKIP() << "promtool is not installed (Debian package `prometheus`): the counters were "
                    "checked, the exposition format was not";
  }
}

}  // namespace
}  // namespace dockhand::testing
