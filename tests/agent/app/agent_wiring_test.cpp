// Agent's wiring, in this process: one Agent built from a config as the program builds it,
// run on a thread against a fake driver on 127.0.0.1, with the real process runner. What only
// the composition can get wrong is checked: it registers; its block server serves the status,
// /metrics and /readyz from the same state (the parts were handed the same registry and status
// board); a task launched by the driver runs through the guard, the executor and the runner
// and its output becomes a block the status counts; the driver's StopExecutor ends run() with
// 0. Its own executable: it blocks the agent's signals for the whole process first, as the
// program does before any thread starts.
#include <chrono>
#include <filesystem>
#include <string>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "app/agent.h"
#include "app/signal_thread.h"
#include "support/fake_driver.h"
#include "support/http_client.h"
#include "support/process.h"

namespace dockhand::agent {
namespace {

namespace proto = dockhand::protocol;
using dockhand::testing::FakeDriver;
using dockhand::testing::httpGet;
using dockhand::testing::TempDir;
using std::chrono_literals::operator""s;

// GETs `url` until `done` holds for the reply's body (the status is made on the core thread
// when asked, so a fresh one may trail the driver's view by a little); 10 s at most.
std::string eventually(const std::string& url,
                       const std::function<bool(const std::string&)>& done) {
  std::string body;
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (std::chrono::steady_clock::now() < deadline) {
    body = httpGet(url).body;
    if (done(body)) return body;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return body;
}

TEST(AgentWiringTest, OneAgentRegistersServesOneStateRunsATaskAndStopsOnTheDriversWord) {
  blockAgentSignals(decommissionSignalNumber("SIGPWR"));
  TempDir dir;
  FakeDriver driver;
  AgentConfig config;
  config.driver_url = driver.url();
  config.executor_id = "wired-1";
  config.app_id = "app-wiring";
  config.cores = 2;
  config.hostname = "127.0.0.1";
  config.work_dir = (dir.path() / "work").string();
  config.plugin_dirs = {DOCKHAND_PLUGIN_DIR};
  config.plugin_manifest_dir = (dir.path() / "no-manifests").string();
  applyDefaults(config);

  Agent agent(config);
  int code = -1;
  std::thread core([&] { code = agent.run(); });
  struct Join {
    std::thread& thread;
    ~Join() {
      if (thread.joinable()) thread.join();
    }
  } join{core};

  ASSERT_TRUE(driver.waitForRegistration(10s));
  const std::string url = driver.agentBlockUrl();
  ASSERT_FALSE(url.empty());

  const auto status = nlohmann::json::parse(eventually(url + "/v1/status", [](const auto& body) {
    return nlohmann::json::parse(body, nullptr, false).value("state", "") == "running";
  }));
  EXPECT_EQ(status["state"], "running");
  EXPECT_EQ(status["executor_id"], "wired-1");
  EXPECT_EQ(status["cores"]["total"], 2);
  ASSERT_EQ(status["plugins"].size(), 1U);
  EXPECT_EQ(status["plugins"][0]["name"], "process");
  EXPECT_EQ(status["plugins"][0]["status"], "loaded");
  EXPECT_EQ(httpGet(url + "/readyz").status, 200);
  const std::string metrics = httpGet(url + "/metrics").body;
  EXPECT_NE(metrics.find("dockhand_agent_state{state=\"running\"} 1\n"), std::string::npos);
  EXPECT_NE(metrics.find("dockhand_build_info{program=\"dockhand\""), std::string::npos);
  // The link counts into the registry /metrics serves (the frames of the handshake).
  EXPECT_NE(metrics.find("dockhand_driver_link_connected 1\n"), std::string::npos);

  // A task whose output becomes a block.
  proto::LaunchTask launch;
  launch.task.task_id = 1;
  launch.task.name = "t1";
  launch.task.payload = {{"command", {"/bin/sh", "-c", "echo wired > output/shuffle_0_1_0"}}};
  ASSERT_TRUE(driver.send(proto::makeMessage(launch)));
  ASSERT_TRUE(driver.waitForStatus(1, proto::TaskState::kFinished).has_value());
  const std::string after = eventually(url + "/v1/status", [](const auto& body) {
    return nlohmann::json::parse(body, nullptr, false)["blocks"].value("count", 0) == 1;
  });
  EXPECT_EQ(nlohmann::json::parse(after)["blocks"]["count"], 1) << after;
  EXPECT_NE(httpGet(url + "/metrics").body.find("dockhand_tasks_started_total 1\n"),
            std::string::npos);

  ASSERT_TRUE(driver.send(proto::makeMessage(proto::StopExecutor{})));
  core.join();
  EXPECT_EQ(code, 0);
}

}  // namespace
}  // namespace dockhand::agent
