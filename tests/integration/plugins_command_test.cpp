// `dockhand plugins check` and plugin_trust with the real programs: the agent binary's
// command, and an agent of a fake driver, over the built-in plugins and the fixture plugins
// that hang (tests/fixtures/plugins).
#include <filesystem>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "support/agent_command.h"
#include "support/fake_driver.h"
#include "support/http_client.h"
#include "support/process.h"

namespace dockhand::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using std::chrono_literals::operator""s;

class PluginsCommandTest : public ::testing::Test {
 protected:
  // The command line of an agent of `driver` with the config file `config`.
  std::vector<std::string> faultsAgent(const fs::path& config, const FakeDriver& driver,
                                       const std::string& id, int cores) {
    return AgentCommand{.config = config,
                        .driver_url = driver.url(),
                        .executor_id = id,
                        .app_id = "plugins",
                        .cores = cores,
                        .work_dir = dir.path() / ("work-" + id)}
        .argv();
  }
  fs::path writeJson(const std::string& name, const json& value) {
    auto path = dir.path() / name;
    writeFile(path, value.dump());
    return path;
  }

  TempDir dir;
};

// `dockhand plugins check` calls each hook once and reports every plugin that fails, each in
// the words the agent would use, bounded by plugin_call_timeout_ms; non-zero at the end.
TEST_F(PluginsCommandTest, PluginsCheckReportsEachPluginThatHangsOrIsMissing) {
  const auto config = writeJson(
      "agent.json", {{"plugins",
                      {{{"name", "process"}},
                       {{"path", DOCKHAND_HANG_DISCOVERY}},
                       {{"path", DOCKHAND_HANG_KILL}},
                       {{"name", "not-installed"}, {"required", false}}}},
                     {"plugin_manifest_dir", (dir.path() / "no-manifests").string()},
                     {"plugin_call_timeout_ms", 1000},
                     {"decommission", {{"migration", {{{"name", DOCKHAND_HANG_MIGRATION}}}}}}});
  ChildProcess check(
      {agentBinary(), "plugins", "check", "--config", config.string(), "--resource", "widget"},
      (dir.path() / "check.log").string());
  EXPECT_EQ(check.waitExit(30s), toInt(ExitCode::kPluginError)) << check.output();
  const std::string out = check.output();
  EXPECT_TRUE(contains(out, "process          OK")) << out;
  EXPECT_TRUE(contains(out, "FAILED: discover(widget): discover() did not return within 1000 ms"))
      << out;
  EXPECT_TRUE(contains(out, "FAILED: kill(): kill() of task 2 did not return within 1000 ms"))
      << out;
  EXPECT_TRUE(contains(out, "not-installed    FAILED")) << out;
  EXPECT_TRUE(contains(out, "(optional: left out, from config /plugins/3)")) << out;
  EXPECT_TRUE(contains(out, "FAILED: migrate(): migrate() did not return within 1000 ms")) << out;
}

// plugin_trust "verified" with the real agent: the process plugin, pinned with `dockhand plugins
// trust`, loads; an optional plugin nobody pinned or signed is refused, the agent registers
// without it and counts the refusal in /metrics; made required, it stops the agent (exit 8)
// with the refusal's words.
TEST_F(PluginsCommandTest, PluginTrustRefusesAnUnverifiedPluginAndTheAgentOtherwiseRuns) {
  const fs::path keys = dir.path() / "keys";
  fs::create_directories(keys);
  const fs::path catalog = dir.path() / "plugins.sha256";
  // The runner, and the peer plugin the agent makes for decommission.migration at start.
  for (const char* plugin : {"dockhand-process.so", "dockhand-peer.so"}) {
    ChildProcess pin(
        {agentBinary(), "plugins", "trust", (fs::path(DOCKHAND_PLUGIN_DIR) / plugin).string(),
         "--catalog", catalog.string()},
        (dir.path() / "pin.log").string());
    ASSERT_EQ(pin.waitExit(10s), 0) << pin.output();
  }
  const json trust = {
      {"policy", "verified"}, {"catalogs", {catalog.string()}}, {"keys_dir", keys.string()}};
  FakeDriver driver;
  const int block_port = unusedPort();
  const auto config = writeJson(
      "agent.json",
      {{"plugins",
        {{{"name", "process"}}, {{"path", DOCKHAND_INSTANT_RUNNER}, {"required", false}}}},
       {"plugin_manifest_dir", (dir.path() / "no-manifests").string()},
       {"plugin_trust", trust},
       {"block_port", block_port}});
  {
    ChildProcess agent(faultsAgent(config, driver, "t1", 1), (dir.path() / "agent.log").string());
    ASSERT_TRUE(driver.waitForRegistration(15s)) << agent.output();
    const std::string metrics =
        httpGet("http://127.0.0.1:" + std::to_string(block_port) + "/metrics").body;
    EXPECT_TRUE(contains(metrics, "dockhand_plugin_refusals_total{policy=\"verified\"} 1"))
        << metrics;
    EXPECT_TRUE(contains(agent.output(), "refused by plugin_trust (policy verified)"))
        << agent.output();
    EXPECT_TRUE(contains(agent.output(), "(optional: left out, from config /plugins/1)"))
        << agent.output();
  }
  FakeDriver second;
  const auto strict = writeJson(
      "strict.json", {{"plugins", {{{"name", "process"}}, {{"path", DOCKHAND_INSTANT_RUNNER}}}},
                      {"plugin_manifest_dir", (dir.path() / "no-manifests").string()},
                      {"plugin_trust", trust}});
  ChildProcess agent(faultsAgent(strict, second, "t2", 1), (dir.path() / "strict.log").string());
  EXPECT_EQ(agent.waitExit(15s), toInt(ExitCode::kPluginError)) << agent.output();
  EXPECT_TRUE(contains(agent.output(), "refused by plugin_trust (policy verified): its SHA-256"))
      << agent.output();
  EXPECT_TRUE(contains(agent.output(), "dockhand plugins trust " DOCKHAND_INSTANT_RUNNER))
      << agent.output();
}

}  // namespace
}  // namespace dockhand::testing
