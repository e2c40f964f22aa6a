// The built-in `script` and `static` discovery plugins, loaded as the agent loads them, with
// real scripts: Spark's GPU discovery script over a fake nvidia-smi on the PATH, a script
// without "#!", and each way a script can fail.
#include <stdlib.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "plugins/plugin_host.h"
#include "resources/resource_discovery.h"

namespace dockhand::agent {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::StartsWith;

const std::filesystem::path kPluginDir = DOCKHAND_PLUGIN_DIR;

class DiscoveryPluginsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/dockhand-discovery-XXXXXX";
    dir_ = ::mkdtemp(pattern);
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  std::string script(const std::string& name, const std::string& text, bool executable = true) {
    auto path = dir_ / name;
    std::ofstream(path) << text;
    ::chmod(path.c_str(), executable ? 0755 : 0644);
    return path.string();
  }
  // Runs the script plugin for `name` with `script_path` as the profile's discovery script.
  PluginResult discover(const std::string& name, const std::string& script_path,
                        const std::string& config = "{}") {
    auto plugin = host_.createResourceDiscovery("script", config);
    return plugin->discover(
        json{{"name", name}, {"amount", 1}, {"discovery_script", script_path}}.dump());
  }

  std::filesystem::path dir_;
  PluginHost host_{{kPluginDir}};
};

// What `nvidia-smi --query-gpu=index --format=csv,noheader` prints on a machine with two GPUs.
constexpr const char* kFakeNvidiaSmi = R"(#!/bin/sh
case "$*" in
  *--query-gpu=index*--format=csv,noheader*) printf '0\n1\n' ;;
  *) echo "fake nvidia-smi: unexpected arguments: $*" >&2; exit 2 ;;
esac
)";

// Spark's examples/src/main/scripts/getGpusResources.sh, unchanged.
constexpr const char* kSparkGpuScript = R"(#!/usr/bin/env bash
ADDRS=`nvidia-smi --query-gpu=index --format=csv,noheader | sed -e ':a' -e 'N' -e'$!ba' -e 's/\n/","/g'`
echo {\"name\": \"gpu\", \"addresses\":[\"$ADDRS\"]}
)";

TEST_F(DiscoveryPluginsTest, SparkGpuScriptWorksUnchangedWithNvidiaSmiOnThePath) {
  std::filesystem::create_directories(dir_ / "bin");
  script("bin/nvidia-smi", kFakeNvidiaSmi);
  const std::string old_path = ::getenv("PATH");
  ::setenv("PATH", ((dir_ / "bin").string() + ":" + old_path).c_str(), 1);
  auto result = discover("gpu", script("getGpusResources.sh", kSparkGpuScript));
  ::setenv("PATH", old_path.c_str(), 1);
  ASSERT_TRUE(result.ok()) << result.error;
  EXPECT_EQ(json::parse(result.json), json::parse(R"({"name":"gpu","addresses":["0","1"]})"));
}

// The same script where there is no nvidia-smi: its pipeline turns nothing into one empty
// line and it prints {"name": "gpu", "addresses": [""]}. The plugin refuses that address,
// naming the script, where Spark would register a GPU "".
TEST_F(DiscoveryPluginsTest, SparkGpuScriptWithoutNvidiaSmiIsRefusedNamingTheScript) {
  std::filesystem::create_directories(dir_ / "bin");
  std::filesystem::create_symlink("/bin/sed", dir_ / "bin" / "sed");
  std::filesystem::create_symlink("/bin/bash", dir_ / "bin" / "bash");
  const std::string old_path = ::getenv("PATH");
  ::setenv("PATH", (dir_ / "bin").c_str(), 1);  // bash and sed, no nvidia-smi
  const std::string path = script("getGpusResources.sh", kSparkGpuScript);
  auto result = discover("gpu", path);
  ::setenv("PATH", old_path.c_str(), 1);
  ASSERT_FALSE(result.ok()) << result.json;
  EXPECT_THAT(result.error,
              HasSubstr("resource 'gpu': discovery script " + path + " printed an empty address"));
  EXPECT_THAT(result.error, HasSubstr(R"(stdout: {"name": "gpu", "addresses":[""]})"));
}

TEST_F(DiscoveryPluginsTest, ScriptWithoutShebangRunsUnderBinSh) {
  auto result = discover("fpga", script("fpga.sh", R"(echo '{"name": "fpga", "addresses": )"
                                                   "[\"f0\"], \"vendor\": \"x\"}'\n"
                                                   "echo 'some progress' >&2\n"));
  ASSERT_TRUE(result.ok()) << result.error;
  EXPECT_EQ(json::parse(result.json), json::parse(R"({"name":"fpga","addresses":["f0"]})"))
      << "extra fields are dropped";
}

TEST_F(DiscoveryPluginsTest, MissingAddressesMeanNone) {
  auto result = discover("fpga", script("none.sh", "echo '{\"name\": \"fpga\"}'\n"));
  ASSERT_TRUE(result.ok()) << result.error;
  EXPECT_EQ(json::parse(result.json)["addresses"], json::array());
}

TEST_F(DiscoveryPluginsTest, EachFailureHasItsOwnMessage) {
  const std::string missing = (dir_ / "nope.sh").string();
  EXPECT_EQ(discover("gpu", missing).error,
            "resource 'gpu': discovery script " + missing + " does not exist");
  const std::string plain = script("plain.sh", "echo '{}'\n", /*executable=*/false);
  EXPECT_EQ(discover("gpu", plain).error,
            "resource 'gpu': discovery script " + plain + " is not executable (chmod +x it)");
  const std::string failing =
      script("fail.sh", "echo partial\necho 'no driver loaded' >&2\nexit 3\n");
  EXPECT_EQ(discover("gpu", failing).error, "resource 'gpu': discovery script " + failing +
                                                " exited with code 3 (stderr: no driver loaded)");
  const std::string garbage = script("garbage.sh", "echo 'GPU 0: Tesla'\n");
  EXPECT_EQ(
      discover("gpu", garbage).error,
      "resource 'gpu': discovery script " + garbage +
          R"( printed no JSON object {"name": ..., "addresses": [...]}; stdout: GPU 0: Tesla)");
  const std::string other = script("other.sh", "echo '{\"name\": \"fpga\", \"addresses\": []}'\n");
  EXPECT_EQ(discover("gpu", other).error,
            "resource 'gpu': discovery script " + other + " reported resource 'fpga', not 'gpu'");
  const std::string hung = script("hung.sh", "sleep 30\n");
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(discover("gpu", hung, R"({"timeout_ms": 300})").error,
            "resource 'gpu': discovery script " + hung +
                " timed out after 300 ms (killed; raise timeout_ms in the script plugin's config)");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
}

TEST_F(DiscoveryPluginsTest, ScriptFromConfigAndDeclineWithoutOne) {
  const std::string gpu = script("g.sh", "echo '{\"name\": \"gpu\", \"addresses\": [\"3\"]}'\n");
  auto plugin = host_.createResourceDiscovery("script", json{{"scripts", {{"gpu", gpu}}}}.dump());
  auto result = plugin->discover(R"({"name":"gpu","amount":1})");
  ASSERT_TRUE(result.ok()) << result.error;
  EXPECT_EQ(json::parse(result.json)["addresses"], json::array({"3"}));
  EXPECT_EQ(plugin->discover(R"({"name":"fpga","amount":1})").status, DH_DECLINED);
}

// A discover() that never returns (the hang-discovery fixture) is given up on after the call
// timeout: the chain fails naming the plugin and the hook, the plugin after it in the chain is
// never asked, and the stuck plugin is not called again.
TEST_F(DiscoveryPluginsTest, DiscoverThatNeverReturnsIsGivenUpOnAfterTheTimeout) {
  PluginHost host({kPluginDir}, /*allow_insecure=*/false,
                  PluginCallSettings{std::chrono::milliseconds(300)});
  PluginDiscoverer hangs(host.create(DOCKHAND_HANG_DISCOVERY, "{}"));
  PluginDiscoverer statics(host.create("static", R"({"resources": {"gpu": ["0"]}})"));
  DiscoveryChain chain({&hangs, &statics});
  ResourceRequests requests;
  requests["gpu"].amount = 1;
  try {
    chain.discoverAll(requests, {});
    FAIL() << "a discover() that never returned was taken as an answer";
  } catch (const ResourceError& e) {
    EXPECT_EQ(e.kind(), ResourceError::Kind::kPluginError);
    EXPECT_STREQ(e.what(),
                 "resource 'gpu': plugin 'hang-discovery' failed: discover() did not return "
                 "within 300 ms (plugin_call_timeout_ms); the call is abandoned");
  }
  EXPECT_EQ(hangs.discover(R"({"name": "gpu", "amount": 1})").error,
            "plugin 'hang-discovery' is stuck: discover() did not return within 300 ms "
            "(plugin_call_timeout_ms); restart the agent to use it again");
  // A plugin that answers in time is unaffected by the bound.
  PluginResult answer = statics.discover(R"({"name": "gpu", "amount": 1})");
  ASSERT_TRUE(answer.ok()) << answer.error;
  EXPECT_EQ(json::parse(answer.json)["addresses"], json::array({"0"}));
}

TEST_F(DiscoveryPluginsTest, ChainOfStaticAndScriptRefusesTooFewAddresses) {
  PluginDiscoverer statics(
      host_.create("static", R"({"resources": {"gpu": ["0", "1"], "licence": ["a"]}})"));
  PluginDiscoverer scripts(host_.create("script", "{}"));
  DiscoveryChain chain({&scripts, &statics});
  ResourceRequests requests;
  requests["gpu"].amount = 2;
  auto found = chain.discoverAll(requests, {});
  EXPECT_EQ(found["gpu"].source, "static");
  EXPECT_EQ(found["gpu"].info.addresses, (std::vector<std::string>{"0", "1"}));
  requests["licence"].amount = 2;
  try {
    chain.discoverAll(requests, {});
    FAIL() << "two licences found where one exists";
  } catch (const ResourceError& e) {
    EXPECT_STREQ(e.what(),
                 "resource 'licence': 2 requested, but static found only 1 address(es): [a]");
  }
}

}  // namespace
}  // namespace dockhand::agent
