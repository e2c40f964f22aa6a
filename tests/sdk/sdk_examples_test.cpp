// The sdk/examples plugins, built out of tree against the installed SDK (the
// sdk_examples_build fixture), loaded and exercised the way the agent uses them.
#include <filesystem>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "dockhand/checksum.hpp"
#include "dockhand/protocol/messages.h"
#include "plugins/plugin_host.h"
#include "support/agent_command.h"
#include "support/fake_driver.h"
#include "support/process.h"

namespace dockhand::testing {
namespace {

namespace proto = dockhand::protocol;
using agent::PluginHost;
using nlohmann::json;
using std::chrono_literals::operator""s;
using ::testing::HasSubstr;

const std::filesystem::path kExamples = DOCKHAND_SDK_EXAMPLES_BUILD_DIR;

std::string examplePlugin(const std::string& example, const std::string& name) {
  return (kExamples / example / ("dockhand-" + name + ".so")).string();
}

TEST(SdkExamplesTest, EchoRunnerRunsATaskInARealAgent) {
  TempDir dir;
  const auto manifests = dir.path() / "plugins.d";
  std::filesystem::create_directories(manifests);
  // The echo runner comes from a drop-in manifest, the way a package would install it.
  writeFile(
      manifests / "50-echo.json",
      json{{"path", examplePlugin("echo-runner", "echo")}, {"config", {{"prefix", "> "}}}}.dump());
  writeFile(dir.path() / "agent.json", json{{"plugin_manifest_dir", manifests.string()}}.dump());
  FakeDriver driver;
  const AgentCommand command{.config = dir.path() / "agent.json",
                             .driver_url = driver.url(),
                             .executor_id = "e1",
                             .app_id = "sdk",
                             .cores = 1,
                             .work_dir = dir.path() / "work"};
  ChildProcess agent(command.argv(), (dir.path() / "agent.log").string());
  ASSERT_TRUE(driver.waitForRegistration(10s)) << agent.output();
  proto::LaunchTask launch;
  launch.task.task_id = 4;
  launch.task.name = "hello";
  launch.task.runner = "echo";
  launch.task.payload = {{"message", "hello from a plugin"}};
  driver.send(proto::makeMessage(launch));
  auto done = driver.waitFor(
      [](const proto::Envelope& e) {
        return e.type == "StatusUpdate" &&
               proto::decodeBody<proto::StatusUpdate>(e.body).state == proto::TaskState::kFinished;
      },
      10s);
  ASSERT_TRUE(done) << agent.output();
  auto update = proto::decodeBody<proto::StatusUpdate>(done->body);
  EXPECT_EQ(update.task_id, 4u);
  EXPECT_EQ(update.result, "> hello from a plugin");
  // The plugin's line goes through the agent's logger, under the plugin's name.
  EXPECT_THAT(agent.output(), ::testing::ContainsRegex("plugin\\.echo.*echo runner ready"));
  EXPECT_THAT(agent.output(), HasSubstr("from " + (manifests / "50-echo.json").string()));
  EXPECT_TRUE(agent.running());
}

TEST(SdkExamplesTest, ListedAddressesAnswersItsResourceAndDeclinesOthers) {
  PluginHost host({});
  auto discovery =
      host.createResourceDiscovery(examplePlugin("listed-addresses", "listed-addresses"),
                                   R"({"resource":"fpga","addresses":["f0","f1"]})");
  auto fpga = discovery->discover(R"({"name":"fpga","amount":2})");
  ASSERT_TRUE(fpga.ok()) << fpga.error;
  EXPECT_EQ(json::parse(fpga.json), json::parse(R"({"name":"fpga","addresses":["f0","f1"]})"));
  EXPECT_EQ(discovery->discover(R"({"name":"gpu","amount":1})").status, DH_DECLINED);
  EXPECT_TRUE(discovery->allocate(R"({"task_id":1,"name":"fpga","addresses":["f1"]})").ok());
  EXPECT_TRUE(discovery->release(R"({"task_id":1,"name":"fpga","addresses":["f1"]})").ok());
  EXPECT_EQ(json::parse(discovery->describe().json)["count"], 2);
  // Its schema is enforced by the host before create.
  try {
    host.createResourceDiscovery(examplePlugin("listed-addresses", "listed-addresses"),
                                 R"({"resource":"fpga"})");
    FAIL() << "created without the required addresses";
  } catch (const agent::PluginLoadError& e) {
    EXPECT_THAT(e.what(), HasSubstr("): config /addresses: is required"));
  }
}

TEST(SdkExamplesTest, CopyToDirMigratesBlocksAndReportsProgress) {
  TempDir dir;
  writeFile(dir.path() / "rdd_1_2", "block bytes");
  PluginHost host({});
  std::vector<std::string> progress;
  auto migration =
      host.createBlockMigration(examplePlugin("copy-to-dir", "copy-to-dir"),
                                json{{"directory", (dir.path() / "fallback").string()}}.dump(),
                                [&](std::string_view p) { progress.emplace_back(p); });
  auto result = migration->migrate(json{
      {"blocks",
       {{{"id", "rdd_1_2"},
         {"path", (dir.path() / "rdd_1_2").string()},
         {"size", 11},
         {"checksum", sdk::checksumOf("block bytes")}}}},
      {"peers", json::array()}}.dump());
  ASSERT_TRUE(result.ok()) << result.error;
  auto answer = json::parse(result.json);
  ASSERT_EQ(answer["migrated"].size(), 1u) << result.json;
  EXPECT_EQ(answer["migrated"][0]["location"], (dir.path() / "fallback" / "rdd_1_2").string());
  EXPECT_EQ(readFile(dir.path() / "fallback" / "rdd_1_2"), "block bytes");
  ASSERT_EQ(progress.size(), 1u);
  EXPECT_EQ(json::parse(progress[0])["done"], true);

  // A copy that is not the block (here: the request's checksum is another's) is not kept.
  writeFile(dir.path() / "rdd_1_3", "other bytes");
  result = migration->migrate(json{
      {"blocks",
       {{{"checksum", sdk::checksumOf("block bytes")},
         {"id", "rdd_1_3"},
         {"path", (dir.path() / "rdd_1_3").string()},
         {"size", 11}}}},
      {"peers", json::array()}}.dump());
  ASSERT_TRUE(result.ok()) << result.error;
  answer = json::parse(result.json);
  EXPECT_TRUE(answer["migrated"].empty()) << result.json;
  ASSERT_EQ(answer["failed"].size(), 1u) << result.json;
  EXPECT_THAT(answer["failed"][0]["reason"].get<std::string>(), HasSubstr("checksum"));
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "fallback" / "rdd_1_3"));
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "fallback" / "rdd_1_3.partial"));
}

TEST(SdkExamplesTest, InspectDescribesEachExampleWithoutCreatingIt) {
  TempDir dir;
  struct Expected {
    std::string example, name, kind;
  };
  for (const auto& e : {Expected{"echo-runner", "echo", "task_runner"},
                        Expected{"listed-addresses", "listed-addresses", "resource_discovery"},
                        Expected{"copy-to-dir", "copy-to-dir", "block_migration"},
                        Expected{"http-put", "http-put", "block_migration"}}) {
    const auto out = dir.path() / (e.name + ".json");
    ChildProcess inspect(
        {agentBinary(), "plugins", "inspect", examplePlugin(e.example, e.name), "--json"},
        out.string());
    ASSERT_EQ(inspect.waitExit(10s), 0) << inspect.output();
    auto info = json::parse(readFile(out));
    EXPECT_EQ(info["name"], e.name);
    EXPECT_EQ(info["version"], "1.0.0");
    // The minor it needs: none of the examples fills a hook newer than 1.0.
    EXPECT_EQ(info["abi"], std::to_string(DH_ABI_MAJOR) + ".0");
    EXPECT_EQ(info["kinds"], json::array({e.kind}));
    EXPECT_EQ(info["config_schema"]["type"], "object") << e.name;
  }
}

// `dockhand plugins check` makes each example as the agent would and calls its hooks once:
// discover, launch and kill, migrate one block (read back where readers would look: the
// copy-to-dir example's directory is the fallback store here), plus the built-in peer plugin
// migrating to a scratch peer.
TEST(SdkExamplesTest, PluginsCheckPassesEachExample) {
  TempDir dir;
  const auto fallback = dir.path() / "fallback";
  std::filesystem::create_directories(fallback);
  const json config = {{"fallback_dir", fallback.string()},
                       {"plugins",
                        {{{"path", examplePlugin("echo-runner", "echo")}},
                         {{"path", examplePlugin("listed-addresses", "listed-addresses")},
                          {"config", {{"resource", "fpga"}, {"addresses", {"f0", "f1"}}}}}}},
                       {"decommission",
                        {{"migration",
                          {"peer",
                           {{"name", examplePlugin("copy-to-dir", "copy-to-dir")},
                            {"config", {{"directory", fallback.string()}}}}}}}}};
  const auto config_file = dir.path() / "agent.json";
  writeFile(config_file, config.dump());
  const auto out = dir.path() / "check.json";
  ChildProcess check({agentBinary(), "plugins", "check", "--config", config_file.string(),
                      "--resource", "fpga", "--payload", R"(echo={"message": "hi"})", "--json"},
                     out.string());
  ASSERT_EQ(check.waitExit(60s), 0) << check.output();
  const json report = json::parse(readFile(out));
  ASSERT_EQ(report["plugins"].size(), 4u) << report.dump(2);
  EXPECT_EQ(report["ok"], true);
  auto checks_of = [&](std::size_t i) { return report["plugins"][i]["checks"].dump(); };
  EXPECT_THAT(checks_of(0), HasSubstr("launch() and kill(): the task ended FINISHED"));
  EXPECT_THAT(checks_of(1), HasSubstr("discover(fpga): 2 address(es) [f0, f1]"));
  EXPECT_THAT(checks_of(2), HasSubstr("to the scratch peer http://127.0.0.1:"));
  EXPECT_THAT(checks_of(3), HasSubstr("to the fallback store " + fallback.string()));
  EXPECT_EQ(report["plugins"][3]["origin"], "config /decommission/migration/1");
  // Nothing of the check is left in the fallback store.
  EXPECT_TRUE(std::filesystem::is_empty(fallback));
}

}  // namespace
}  // namespace dockhand::testing
