// The built-in `slurm` discovery plugin, loaded as the agent loads it, over the environment
// values slurmstepd sets for a task: which variable wins, ranges, UUIDs, Slurm's "NoDevFiles",
// the declines outside a job or without GPUs, malformed lists, describe(), and the plugin in
// a chain before `static`.
#include <stdlib.h>

#include <map>
#include <optional>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "plugins/plugin_host.h"
#include "resources/resource_discovery.h"

namespace dockhand::agent {
namespace {

using nlohmann::json;

constexpr const char* kGpuRequest = R"({"name": "gpu", "amount": 1})";

// Clears the variables the plugin reads and puts them back as they were afterwards.
class SlurmPluginTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* name : {"SLURM_JOB_ID", "SLURM_STEP_ID", "SLURM_PROCID",
                             "CUDA_VISIBLE_DEVICES", "SLURM_STEP_GPUS", "SLURM_JOB_GPUS"}) {
      const char* value = ::getenv(name);
      saved_[name] = value ? std::optional<std::string>(value) : std::nullopt;
      ::unsetenv(name);
    }
  }
  void TearDown() override {
    for (const auto& [name, value] : saved_) {
      if (value) {
        ::setenv(name.c_str(), value->c_str(), 1);
      } else {
        ::unsetenv(name.c_str());
      }
    }
  }
  static void set(const char* name, const char* value) { ::setenv(name, value, 1); }
  // The answer of a fresh plugin with `config` for `request`.
  PluginResult discover(const std::string& config = "{}", const char* request = kGpuRequest) {
    return host_.createResourceDiscovery("slurm", config)->discover(request);
  }
  static json addresses(const PluginResult& result) {
    EXPECT_TRUE(result.ok()) << result.error;
    if (!result.ok()) return nullptr;
    const json answer = json::parse(result.json);
    EXPECT_EQ(answer["name"], "gpu");
    return answer["addresses"];
  }

  std::map<std::string, std::optional<std::string>> saved_;
  PluginHost host_{{DOCKHAND_PLUGIN_DIR}};
};

TEST_F(SlurmPluginTest, CudaVisibleDevicesWinsOverTheNodeIndices) {
  // A node whose device cgroup hides the other GPUs: CUDA numbers the step's two as 0 and 1.
  set("SLURM_JOB_ID", "4242");
  set("SLURM_JOB_GPUS", "2,3,5");
  set("SLURM_STEP_GPUS", "2,3");
  set("CUDA_VISIBLE_DEVICES", "0,1");
  EXPECT_EQ(addresses(discover()), json::array({"0", "1"}));
}

TEST_F(SlurmPluginTest, StepGpusThenJobGpusWithoutCudaVisibleDevices) {
  set("SLURM_JOB_ID", "4242");
  set("SLURM_JOB_GPUS", "2,3,5");
  set("SLURM_STEP_GPUS", "3,5");
  EXPECT_EQ(addresses(discover()), json::array({"3", "5"}));
  ::unsetenv("SLURM_STEP_GPUS");
  EXPECT_EQ(addresses(discover()), json::array({"2", "3", "5"}));
}

TEST_F(SlurmPluginTest, EmptyValuesAndNoDevFilesAreSkipped) {
  set("SLURM_JOB_ID", "7");
  set("CUDA_VISIBLE_DEVICES", "NoDevFiles");
  set("SLURM_STEP_GPUS", "");
  set("SLURM_JOB_GPUS", " 1 , 0 ");
  EXPECT_EQ(addresses(discover()), json::array({"1", "0"}));
}

TEST_F(SlurmPluginTest, RangesAreExpandedAndUuidsKept) {
  set("SLURM_JOB_ID", "7");
  set("SLURM_STEP_GPUS", "0-2,6");
  EXPECT_EQ(addresses(discover()), json::array({"0", "1", "2", "6"}));
  set("CUDA_VISIBLE_DEVICES",
      "GPU-5fd4e2a1-0c3b-8d9e-1f2a-3b4c5d6e7f80,MIG-GPU-a1b2c3d4-e5f6-0718-293a-4b5c6d7e8f90/1/0");
  EXPECT_EQ(addresses(discover()),
            json::array({"GPU-5fd4e2a1-0c3b-8d9e-1f2a-3b4c5d6e7f80",
                         "MIG-GPU-a1b2c3d4-e5f6-0718-293a-4b5c6d7e8f90/1/0"}));
}

TEST_F(SlurmPluginTest, DeclinesOutsideASlurmJob) {
  set("CUDA_VISIBLE_DEVICES", "0,1");  // set by something else: not Slurm's to offer
  EXPECT_EQ(discover().status, DH_DECLINED);
  auto plugin = host_.createResourceDiscovery("slurm", "{}");
  const json details = json::parse(plugin->describe().json);
  EXPECT_EQ(details["in_slurm_job"], false);
  EXPECT_EQ(details["addresses"], json::array());
  EXPECT_EQ(details["reason"], "not in a Slurm job (SLURM_JOB_ID is not set)");
  EXPECT_EQ(details["variables"]["CUDA_VISIBLE_DEVICES"], "0,1");
  EXPECT_EQ(details["variables"]["SLURM_STEP_GPUS"], nullptr);
}

TEST_F(SlurmPluginTest, DeclinesAJobWithoutGpusAndOtherResources) {
  set("SLURM_JOB_ID", "99");
  EXPECT_EQ(discover().status, DH_DECLINED);
  auto plugin = host_.createResourceDiscovery("slurm", "{}");
  EXPECT_EQ(json::parse(plugin->describe().json)["reason"],
            "Slurm job 99 gave this task no GPU (none of CUDA_VISIBLE_DEVICES, SLURM_STEP_GPUS, "
            "SLURM_JOB_GPUS is set)");
  set("SLURM_STEP_GPUS", "0");
  EXPECT_EQ(discover("{}", R"({"name": "fpga", "amount": 1})").status, DH_DECLINED);
}

TEST_F(SlurmPluginTest, MalformedListsAreErrors) {
  set("SLURM_JOB_ID", "99");
  set("SLURM_STEP_GPUS", "0,,1");
  PluginResult result = discover();
  EXPECT_EQ(result.status, DH_ERROR);
  EXPECT_NE(result.error.find("SLURM_STEP_GPUS='0,,1': entry 2 is empty"), std::string::npos)
      << result.error;
  set("SLURM_STEP_GPUS", "0,1,0");
  result = discover();
  EXPECT_EQ(result.status, DH_ERROR);
  EXPECT_NE(result.error.find("SLURM_STEP_GPUS='0,1,0' lists GPU '0' twice"), std::string::npos)
      << result.error;
  set("SLURM_STEP_GPUS", "3-1");
  result = discover();
  EXPECT_EQ(result.status, DH_ERROR);
  EXPECT_NE(result.error.find("'3-1' is not a range of GPU indices"), std::string::npos)
      << result.error;
  // describe() reports the problem instead of failing.
  auto plugin = host_.createResourceDiscovery("slurm", "{}");
  const PluginResult described = plugin->describe();
  ASSERT_TRUE(described.ok()) << described.error;
  EXPECT_NE(json::parse(described.json)["error"].get<std::string>().find("'3-1'"),
            std::string::npos);
}

TEST_F(SlurmPluginTest, ConfigRenamesTheResourceAndOrdersTheVariables) {
  set("SLURM_JOB_ID", "5");
  set("CUDA_VISIBLE_DEVICES", "0");
  set("SLURM_STEP_GPUS", "4");
  const char* config = R"({"resource": "cuda", "variables": ["SLURM_STEP_GPUS"]})";
  const PluginResult result = discover(config, R"({"name": "cuda", "amount": 1})");
  ASSERT_TRUE(result.ok()) << result.error;
  EXPECT_EQ(json::parse(result.json), json::parse(R"({"name": "cuda", "addresses": ["4"]})"));
  EXPECT_EQ(discover(config).status, DH_DECLINED);
  EXPECT_ANY_THROW(host_.createResourceDiscovery("slurm", R"({"variables": []})"));
  EXPECT_ANY_THROW(host_.createResourceDiscovery("slurm", R"({"gpus": 2})"));
}

TEST_F(SlurmPluginTest, DescribeNamesTheJobAndTheSource) {
  set("SLURM_JOB_ID", "31");
  set("SLURM_STEP_ID", "0");
  set("SLURM_PROCID", "3");
  set("SLURM_STEP_GPUS", "6,7");
  auto plugin = host_.createResourceDiscovery("slurm", "{}");
  const json details = json::parse(plugin->describe().json);
  EXPECT_EQ(details["job_id"], "31");
  EXPECT_EQ(details["step_id"], "0");
  EXPECT_EQ(details["procid"], "3");
  EXPECT_EQ(details["in_slurm_job"], true);
  EXPECT_EQ(details["source"], "SLURM_STEP_GPUS");
  EXPECT_EQ(details["addresses"], json::array({"6", "7"}));
  EXPECT_FALSE(details.contains("reason"));
}

// In a chain the agent builds (`slurm`, then `static`): inside a job with GPUs slurm answers;
// outside one the static list does.
TEST_F(SlurmPluginTest, InAChainBeforeStatic) {
  PluginDiscoverer slurm(host_.create("slurm", "{}"));
  PluginDiscoverer statics(host_.create("static", R"({"resources": {"gpu": ["9"]}})"));
  DiscoveryChain chain({&slurm, &statics});
  ResourceRequests requests;
  requests["gpu"].amount = 2;
  set("SLURM_JOB_ID", "12");
  set("SLURM_STEP_GPUS", "0,1");
  auto found = chain.discoverAll(requests, {});
  EXPECT_EQ(found["gpu"].source, "slurm");
  EXPECT_EQ(found["gpu"].info.addresses, (std::vector<std::string>{"0", "1"}));
  ::unsetenv("SLURM_JOB_ID");
  requests["gpu"].amount = 1;
  found = chain.discoverAll(requests, {});
  EXPECT_EQ(found["gpu"].source, "static");
  EXPECT_EQ(found["gpu"].info.addresses, (std::vector<std::string>{"9"}));
}

}  // namespace
}  // namespace dockhand::agent
