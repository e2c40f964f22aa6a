// The running agent's status output (GET /v1/status on its block server) with real agent
// processes: the host plugin's cores, memory and cgroup limits and the nvidia plugin's GPUs
// (over a fake libnvidia-ml with two GPUs) as discovered; which task holds which GPU while
// tasks run, and that the addresses come back when they end; and an optional plugin that
// failed to load, with its path and why.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "dockhand/protocol/messages.h"
#include "support/agent_command.h"
#include "support/fake_driver.h"
#include "support/http_client.h"
#include "support/process.h"

namespace dockhand::testing {
namespace {

namespace proto = dockhand::protocol;
using nlohmann::json;
using std::chrono_literals::operator""s;
using ::testing::HasSubstr;

// The agent's /v1/status as JSON, or nullopt when it does not answer 200 with JSON.
std::optional<json> fetchStatus(const std::string& block_url) {
  HttpReply reply = httpGet(block_url + "/v1/status");
  if (reply.status != 200) return std::nullopt;
  json parsed = json::parse(reply.body, nullptr, false);
  if (parsed.is_discarded()) return std::nullopt;
  return parsed;
}

// MemTotal of /proc/meminfo in bytes (0 when it cannot be read).
std::uint64_t memTotalBytes() {
  std::ifstream in("/proc/meminfo");
  for (std::string line; std::getline(in, line);) {
    std::istringstream fields(line);
    std::string key;
    std::uint64_t kib = 0;
    if (fields >> key >> kib && key == "MemTotal:") return kib * 1024;
  }
  return 0;
}

class AgentStatusTest : public ::testing::Test {
 protected:
  // An agent config with the process runner, the host plugin, the nvidia plugin over the fake
  // NVML (nvidia-smi switched off, so the GPUs can only come from the fake), `extra` plugins,
  // asking for two GPUs.
  std::string agentConfig(const json& extra = json::array()) {
    json plugins = {{{"name", "process"}},
                    {{"name", "host"}},
                    {{"name", "nvidia"},
                     {"config", {{"nvml_library", DOCKHAND_FAKE_NVML}, {"nvidia_smi", ""}}}}};
    for (const auto& p : extra) plugins.push_back(p);
    const auto path = dir.path() / "agent.json";
    writeFile(path, json{{"plugins", plugins},
                         {"plugin_manifest_dir", (dir.path() / "no-manifests").string()},
                         {"resources", {{"gpu", {{"amount", 2}}}}}}
                        .dump(2));
    return path.string();
  }
  std::unique_ptr<ChildProcess> startAgent(const std::string& config, const FakeDriver& driver) {
    const AgentCommand command{.config = config,
                               .driver_url = driver.url(),
                               .executor_id = "s1",
                               .app_id = "status",
                               .cores = 4,
                               .work_dir = dir.path() / "work"};
    return std::make_unique<ChildProcess>(command.argv(), (dir.path() / "agent.log").string());
  }
  // Polls the agent's status until `holds` is true of it; returns the last status read.
  json waitForStatus(const FakeDriver& driver, const std::function<bool(const json&)>& holds) {
    json last;
    waitUntil(
        [&] {
          auto status = fetchStatus(driver.agentBlockUrl());
          if (!status) return false;
          last = *status;
          return holds(last);
        },
        15s);
    return last;
  }
  static proto::Envelope launchOnGpu(std::uint64_t task_id, const std::string& gpu) {
    proto::LaunchTask msg;
    msg.task.task_id = task_id;
    msg.task.name = "t" + std::to_string(task_id);
    msg.task.payload = {{"shell", "exec sleep 300"}};
    msg.task.resources = {{"gpu", {gpu}}};
    return proto::makeMessage(msg);
  }
  static proto::Envelope kill(std::uint64_t task_id) {
    proto::KillTask msg;
    msg.task_id = task_id;
    msg.reason = "test done";
    return proto::makeMessage(msg);
  }

  TempDir dir;
};

// The status is current from the moment the agent sends LaunchedExecutor (docs/protocol.md
// 8.5): a driver that asks right after it sees the agent running with its resources, not the
// board of before the registration.
TEST_F(AgentStatusTest, IsCurrentAsSoonAsTheAgentHasRegistered) {
  FakeDriver driver;
  auto agent = startAgent(agentConfig(), driver);
  ASSERT_TRUE(driver.waitForRegistration(20s)) << agent->output();
  const auto status = fetchStatus(driver.agentBlockUrl());
  ASSERT_TRUE(status.has_value()) << agent->output();
  EXPECT_EQ((*status)["state"], "running") << status->dump(2);
  EXPECT_EQ((*status)["resources"]["gpu"]["addresses"], json::array({"0", "1"})) << status->dump(2);
}

TEST_F(AgentStatusTest, ShowsEachGpuAndTheHostAsTheirPluginsDescribeThem) {
  FakeDriver driver;
  auto agent = startAgent(agentConfig(), driver);
  ASSERT_TRUE(driver.waitForRegistration(20s)) << agent->output();
  const json status = waitForStatus(
      driver, [](const json& s) { return s.contains("discovery") && !s["discovery"].is_null(); });
  ASSERT_TRUE(status.contains("resources")) << status.dump(2) << agent->output();

  const json& gpu = status["resources"]["gpu"];
  EXPECT_EQ(gpu["addresses"], json::array({"0", "1"})) << status.dump(2);
  EXPECT_EQ(gpu["found_by"], "nvidia");
  EXPECT_EQ(gpu["requested"], 2);
  EXPECT_EQ(gpu["details"]["source"], "nvml");
  ASSERT_EQ(gpu["details"]["gpus"].size(), 2u) << status.dump(2);
  for (int i = 0; i < 2; ++i) {
    const json& g = gpu["details"]["gpus"][i];
    EXPECT_EQ(g["index"], std::to_string(i));
    EXPECT_EQ(g["name"], "NVIDIA H100 80GB HBM3 #" + std::to_string(i));
    EXPECT_EQ(g["uuid"], "GPU-fake-nvml-" + std::to_string(i));
    EXPECT_EQ(g["memory_total_mib"], 80 * 1024);
    EXPECT_EQ(gpu["allocation"][std::to_string(i)]["held_by"], json::array());
    EXPECT_EQ(gpu["allocation"][std::to_string(i)]["free"], 1);
  }
  EXPECT_EQ(gpu["tasks"], json::array());

  // The script plugin would be the chain's last step for a profile's discovery script; no
  // request names one here, so it was never loaded (ResourcesTest covers the loading).
  EXPECT_EQ(status["discovery"]["chain"], json::array({"host", "nvidia"})) << status.dump(2);
  const json& host = status["discovery"]["plugins"]["host"];
  ASSERT_TRUE(host.is_object()) << status.dump(2);
  EXPECT_EQ(host["cores"]["online"], ::sysconf(_SC_NPROCESSORS_ONLN)) << host.dump(2);
  EXPECT_GE(host["cores"]["affinity"].get<int>(), 1);
  EXPECT_GE(host["cores"]["effective"].get<int>(), 1);
  EXPECT_TRUE(host["cores"].contains("cgroup_limit")) << host.dump(2);
  EXPECT_EQ(host["memory"]["total_bytes"], memTotalBytes()) << host.dump(2);
  EXPECT_TRUE(host["memory"].contains("cgroup_limit_bytes")) << host.dump(2);
  EXPECT_TRUE(host.contains("cgroup")) << host.dump(2);
  EXPECT_EQ(status["discovery"]["plugins"]["nvidia"], gpu["details"]);
}

// Half a GPU per task (the app's profile): two tasks share GPU 0, and the status says so
// while they run; a task's share comes back when it ends.
TEST_F(AgentStatusTest, ShowsWhichTaskHoldsWhichGpuWhileTasksRun) {
  FakeDriver::Options options;
  options.resource_profile.task_resources = {{"gpu", 0.5}};
  FakeDriver driver(options);
  auto agent = startAgent(agentConfig(), driver);
  ASSERT_TRUE(driver.waitForRegistration(20s)) << agent->output();
  driver.send(launchOnGpu(11, "0"));
  driver.send(launchOnGpu(12, "0"));
  ASSERT_TRUE(driver.waitForStatus(11, proto::TaskState::kRunning)) << agent->output();
  ASSERT_TRUE(driver.waitForStatus(12, proto::TaskState::kRunning)) << agent->output();

  json status = waitForStatus(driver, [](const json& s) {
    return s.contains("resources") && s["resources"].contains("gpu") &&
           s["resources"]["gpu"]["tasks"].size() == 2;
  });
  const json& gpu = status["resources"]["gpu"];
  EXPECT_EQ(gpu["amount_per_task"], 0.5) << status.dump(2);
  EXPECT_EQ(gpu["tasks_per_address"], 2);
  EXPECT_EQ(gpu["allocation"]["0"]["held_by"], json::array({11, 12})) << status.dump(2);
  EXPECT_EQ(gpu["allocation"]["0"]["free"], 0);
  EXPECT_EQ(gpu["allocation"]["1"]["held_by"], json::array());
  EXPECT_EQ(gpu["allocation"]["1"]["free"], 2);
  const json on_gpu0 = json::array({"0"});
  EXPECT_EQ(gpu["tasks"],
            json::array({json{{"task_id", 11}, {"addresses", on_gpu0}, {"amount", 0.5}},
                         json{{"task_id", 12}, {"addresses", on_gpu0}, {"amount", 0.5}}}));
  EXPECT_EQ(status["running_tasks"], 2);

  driver.send(kill(11));
  ASSERT_TRUE(driver.waitForStatus(11, proto::TaskState::kKilled)) << agent->output();
  status = waitForStatus(driver,
                         [](const json& s) { return s["resources"]["gpu"]["tasks"].size() == 1; });
  EXPECT_EQ(status["resources"]["gpu"]["allocation"]["0"]["held_by"], json::array({12}))
      << status.dump(2);
  EXPECT_EQ(status["resources"]["gpu"]["allocation"]["0"]["free"], 1);

  driver.send(kill(12));
  ASSERT_TRUE(driver.waitForStatus(12, proto::TaskState::kKilled)) << agent->output();
  status =
      waitForStatus(driver, [](const json& s) { return s["resources"]["gpu"]["tasks"].empty(); });
  EXPECT_EQ(status["resources"]["gpu"]["allocation"]["0"]["free"], 2) << status.dump(2);
}

// An optional plugin that cannot be created (its create() fails) and one that does not
// exist: the agent runs without them and its status lists each, with where it was looked
// for and why it is not there.
TEST_F(AgentStatusTest, ListsOptionalPluginsThatFailedToLoad) {
  FakeDriver driver;
  const json broken = {{{"path", DOCKHAND_CREATE_FAILS_PLUGIN}, {"required", false}},
                       {{"name", "no-such-plugin"}, {"required", false}}};
  auto agent = startAgent(agentConfig(broken), driver);
  ASSERT_TRUE(driver.waitForRegistration(20s)) << agent->output();
  const json status = waitForStatus(
      driver, [](const json& s) { return s.contains("plugins") && s["plugins"].size() == 5; });
  ASSERT_EQ(status["plugins"].size(), 5u) << status.dump(2) << agent->output();

  std::vector<std::string> loaded;
  for (const auto& p : status["plugins"]) {
    if (p["status"] == "loaded") loaded.push_back(p["name"]);
  }
  EXPECT_EQ(loaded, (std::vector<std::string>{"process", "host", "nvidia"})) << status.dump(2);

  const json& create_fails = status["plugins"][3];
  EXPECT_EQ(create_fails["status"], "failed") << status.dump(2);
  EXPECT_EQ(create_fails["name"], "create-fails");
  EXPECT_EQ(create_fails["required"], false);
  EXPECT_EQ(create_fails["origin"], "config /plugins/3");
  EXPECT_EQ(std::filesystem::path(create_fails["path"].get<std::string>()),
            std::filesystem::path(DOCKHAND_CREATE_FAILS_PLUGIN));
  EXPECT_THAT(create_fails["error"].get<std::string>(), HasSubstr("no licence for this machine"));

  const json& missing = status["plugins"][4];
  EXPECT_EQ(missing["status"], "failed") << status.dump(2);
  EXPECT_EQ(missing["name"], "no-such-plugin");
  EXPECT_FALSE(missing.contains("path")) << "a plugin that was not found has no path";
  EXPECT_THAT(missing["error"].get<std::string>(), HasSubstr("no-such-plugin"));
  EXPECT_TRUE(agent->running()) << agent->output();
}

}  // namespace
}  // namespace dockhand::testing
