// The built-in `nvidia` and `host` discovery plugins, loaded as the agent loads them.
//
// nvidia: a fake nvidia-smi on the PATH prints what the real one prints for two GPUs; NVML is
// pointed at a library that does not exist so the fallback is what runs (this test machine
// has no NVIDIA GPU). Without NVML and nvidia-smi the plugin declines.
// host: the probe over a fake /proc and cgroup tree (v2 and v1), and the plugin's describe().
#include <stdlib.h>
#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "host_info.h"
#include "plugins/plugin_host.h"

namespace dockhand::agent {
namespace {

using nlohmann::json;

const std::filesystem::path kPluginDir = DOCKHAND_PLUGIN_DIR;

class TempDir : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/dockhand-nvidia-host-XXXXXX";
    dir_ = ::mkdtemp(pattern);
    old_path_ = ::getenv("PATH") ? ::getenv("PATH") : "";
  }
  void TearDown() override {
    ::setenv("PATH", old_path_.c_str(), 1);
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  std::string file(const std::string& name, const std::string& text, bool executable = false) {
    auto path = dir_ / name;
    std::filesystem::create_directories(path.parent_path());
    std::ofstream(path) << text;
    ::chmod(path.c_str(), executable ? 0755 : 0644);
    return path.string();
  }
  // PATH holds only <dir>/bin (and nothing with nvidia-smi in it unless the test puts it).
  void isolatePath() {
    std::filesystem::create_directories(dir_ / "bin");
    ::setenv("PATH", (dir_ / "bin").c_str(), 1);
  }

  std::filesystem::path dir_;
  std::string old_path_;
  PluginHost host_{{kPluginDir}};
};

// What `nvidia-smi --query-gpu=index,name,uuid,memory.total --format=csv,noheader,nounits`
// prints on a machine with two A100s; any other arguments are refused as the real one would.
constexpr const char* kFakeNvidiaSmi = R"(#!/bin/sh
if [ "$*" = "--query-gpu=index,name,uuid,memory.total --format=csv,noheader,nounits" ]; then
  echo "0, NVIDIA A100-SXM4-80GB, GPU-5fd4e2a1-0c3b-8d9e-1f2a-3b4c5d6e7f80, 81920"
  echo "1, NVIDIA A100-SXM4-80GB, GPU-a1b2c3d4-e5f6-0718-293a-4b5c6d7e8f90, 81920"
  exit 0
fi
echo "fake nvidia-smi: unexpected arguments: $*" >&2
exit 2
)";

constexpr const char* kNoNvml = R"({"nvml_library": "libdockhand-test-no-such-nvml.so.1"})";

using NvidiaPluginTest = TempDir;

TEST_F(NvidiaPluginTest, FakeNvidiaSmiOnThePathListsTwoGpusByIndex) {
  isolatePath();
  file("bin/nvidia-smi", kFakeNvidiaSmi, /*executable=*/true);
  auto plugin = host_.createResourceDiscovery("nvidia", kNoNvml);
  auto result = plugin->discover(R"({"name": "gpu", "amount": 2, "vendor": "nvidia.com"})");
  ASSERT_TRUE(result.ok()) << result.error;
  EXPECT_EQ(json::parse(result.json), json::parse(R"({"name":"gpu","addresses":["0","1"]})"));

  auto described = plugin->describe();
  ASSERT_TRUE(described.ok()) << described.error;
  const json details = json::parse(described.json);
  EXPECT_EQ(details["source"], "nvidia-smi");
  ASSERT_EQ(details["gpus"].size(), 2u);
  EXPECT_EQ(details["gpus"][0]["index"], "0");
  EXPECT_EQ(details["gpus"][0]["name"], "NVIDIA A100-SXM4-80GB");
  EXPECT_EQ(details["gpus"][0]["uuid"], "GPU-5fd4e2a1-0c3b-8d9e-1f2a-3b4c5d6e7f80");
  EXPECT_EQ(details["gpus"][0]["memory_total_mib"], 81920);
  EXPECT_EQ(details["gpus"][1]["uuid"], "GPU-a1b2c3d4-e5f6-0718-293a-4b5c6d7e8f90");
}

TEST_F(NvidiaPluginTest, NvmlIsUsedWhenItLoads) {
  isolatePath();  // no nvidia-smi: the answer can only come from NVML
  auto plugin =
      host_.createResourceDiscovery("nvidia", json{{"nvml_library", DOCKHAND_FAKE_NVML}}.dump());
  auto result = plugin->discover(R"({"name": "gpu", "amount": 2})");
  ASSERT_TRUE(result.ok()) << result.error;
  EXPECT_EQ(json::parse(result.json), json::parse(R"({"name":"gpu","addresses":["0","1"]})"));
  const json details = json::parse(plugin->describe().json);
  EXPECT_EQ(details["source"], "nvml");
  ASSERT_EQ(details["gpus"].size(), 2u);
  EXPECT_EQ(details["gpus"][1]["name"], "NVIDIA H100 80GB HBM3 #1");
  EXPECT_EQ(details["gpus"][1]["uuid"], "GPU-fake-nvml-1");
  EXPECT_EQ(details["gpus"][1]["memory_total_mib"], 80 * 1024);
}

TEST_F(NvidiaPluginTest, DeclinesOtherResources) {
  isolatePath();
  file("bin/nvidia-smi", kFakeNvidiaSmi, /*executable=*/true);
  auto plugin = host_.createResourceDiscovery("nvidia", kNoNvml);
  EXPECT_EQ(plugin->discover(R"({"name": "fpga", "amount": 1})").status, DH_DECLINED);
}

TEST_F(NvidiaPluginTest, DeclinesWithoutAnyNvidiaDriver) {
  isolatePath();  // no nvidia-smi, no NVML
  auto plugin = host_.createResourceDiscovery("nvidia", kNoNvml);
  auto result = plugin->discover(R"({"name": "gpu", "amount": 1})");
  EXPECT_EQ(result.status, DH_DECLINED) << result.error;
  const json details = json::parse(plugin->describe().json);
  EXPECT_EQ(details["driver"], false);
  EXPECT_EQ(details["gpus"], json::array());
  EXPECT_NE(details["reason"].get<std::string>().find("nvidia-smi not found on the PATH"),
            std::string::npos)
      << details.dump();
}

TEST_F(NvidiaPluginTest, DeclinesWhenNvidiaSmiCannotReachTheDriver) {
  isolatePath();
  file("bin/nvidia-smi",
       "#!/bin/sh\necho \"NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA "
       "driver. Make sure that the latest NVIDIA driver is installed and running.\"\nexit 9\n",
       /*executable=*/true);
  auto plugin = host_.createResourceDiscovery("nvidia", kNoNvml);
  EXPECT_EQ(plugin->discover(R"({"name": "gpu", "amount": 1})").status, DH_DECLINED);
}

TEST_F(NvidiaPluginTest, AHungNvidiaSmiIsKilledAtTheTimeout) {
  isolatePath();
  file("bin/nvidia-smi", "#!/bin/sh\n/bin/sleep 30\n", /*executable=*/true);
  auto plugin =
      host_.createResourceDiscovery("nvidia", R"({"nvml_library": "", "timeout_ms": 300})");
  const auto start = std::chrono::steady_clock::now();
  auto result = plugin->discover(R"({"name": "gpu", "amount": 1})");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  EXPECT_EQ(result.status, DH_ERROR);
  EXPECT_NE(result.error.find("timed out after 300 ms"), std::string::npos) << result.error;
}

TEST_F(NvidiaPluginTest, MalformedNvidiaSmiOutputIsAnError) {
  isolatePath();
  file("bin/nvidia-smi", "#!/bin/sh\necho 'GPU 0: Tesla T4'\n", /*executable=*/true);
  auto plugin = host_.createResourceDiscovery("nvidia", kNoNvml);
  auto result = plugin->discover(R"({"name": "gpu", "amount": 1})");
  EXPECT_EQ(result.status, DH_ERROR);
  EXPECT_NE(result.error.find("printed a line that is not 'index, name, uuid, memory.total'"),
            std::string::npos)
      << result.error;
}

using HostProbeTest = TempDir;

TEST_F(HostProbeTest, CgroupV2QuotaAndMemoryLimit) {
  file("proc/meminfo", "MemTotal:       16384000 kB\nMemFree: 1 kB\nMemAvailable:    8192000 kB\n");
  file("proc/self/cgroup", "0::/dockhand.slice/agent.service\n");
  file("cgroup/dockhand.slice/agent.service/cpu.max", "250000 100000\n");
  file("cgroup/dockhand.slice/agent.service/memory.max", "4294967296\n");
  host::HostRoots roots{(dir_ / "proc").string(), (dir_ / "cgroup").string(), false, 16};
  const auto info = host::probeHost(roots);
  EXPECT_EQ(info.cgroup_version, "v2");
  EXPECT_EQ(info.online_cpus, 16);
  ASSERT_TRUE(info.cgroup_cpu_limit);
  EXPECT_DOUBLE_EQ(*info.cgroup_cpu_limit, 2.5);
  EXPECT_EQ(info.effective_cpus, 3) << "a quota of 2.5 CPUs rounds up";
  EXPECT_EQ(info.memory_total, 16384000ull * 1024);
  EXPECT_EQ(info.memory_available, 8192000ull * 1024);
  EXPECT_EQ(info.cgroup_memory_limit, 4294967296ull);
}

TEST_F(HostProbeTest, CgroupV2ParentLimitsBoundTheChild) {
  file("proc/self/cgroup", "0::/dockhand.slice/agent.service\n");
  file("cgroup/dockhand.slice/agent.service/cpu.max", "max 100000\n");
  file("cgroup/dockhand.slice/agent.service/memory.max", "8589934592\n");
  file("cgroup/dockhand.slice/cpu.max", "150000 100000\n");
  file("cgroup/dockhand.slice/memory.max", "2147483648\n");
  file("cgroup/cpu.max", "max 100000\n");
  host::HostRoots roots{(dir_ / "proc").string(), (dir_ / "cgroup").string(), false, 16};
  const auto info = host::probeHost(roots);
  ASSERT_TRUE(info.cgroup_cpu_limit);
  EXPECT_DOUBLE_EQ(*info.cgroup_cpu_limit, 1.5);
  EXPECT_EQ(info.effective_cpus, 2);
  EXPECT_EQ(info.cgroup_memory_limit, 2147483648ull);
}

TEST_F(HostProbeTest, CgroupV2WithoutLimitsAtTheRoot) {
  file("proc/meminfo", "MemTotal: 1024 kB\n");
  file("proc/self/cgroup", "0::/\n");
  file("cgroup/cpu.max", "max 100000\n");
  file("cgroup/memory.max", "max\n");
  host::HostRoots roots{(dir_ / "proc").string(), (dir_ / "cgroup").string(), false, 8};
  const auto info = host::probeHost(roots);
  EXPECT_EQ(info.cgroup_version, "v2");
  EXPECT_FALSE(info.cgroup_cpu_limit);
  EXPECT_FALSE(info.cgroup_memory_limit);
  EXPECT_EQ(info.effective_cpus, 8);
}

TEST_F(HostProbeTest, CgroupV1Limits) {
  file("proc/meminfo", "MemTotal: 2048 kB\n");
  file("proc/self/cgroup", "5:memory:/docker/abc\n4:cpu,cpuacct:/docker/abc\n");
  file("cgroup/cpu,cpuacct/docker/abc/cpu.cfs_quota_us", "150000\n");
  file("cgroup/cpu,cpuacct/docker/abc/cpu.cfs_period_us", "100000\n");
  file("cgroup/memory/docker/abc/memory.limit_in_bytes", "536870912\n");
  host::HostRoots roots{(dir_ / "proc").string(), (dir_ / "cgroup").string(), false, 32};
  const auto info = host::probeHost(roots);
  EXPECT_EQ(info.cgroup_version, "v1");
  ASSERT_TRUE(info.cgroup_cpu_limit);
  EXPECT_DOUBLE_EQ(*info.cgroup_cpu_limit, 1.5);
  EXPECT_EQ(info.effective_cpus, 2);
  EXPECT_EQ(info.cgroup_memory_limit, 536870912ull);
}

TEST_F(HostProbeTest, CgroupV1UnlimitedAndNoCgroupAtAll) {
  file("proc/self/cgroup", "4:cpu,cpuacct:/\n5:memory:/\n");
  file("cgroup/cpu,cpuacct/cpu.cfs_quota_us", "-1\n");
  file("cgroup/cpu,cpuacct/cpu.cfs_period_us", "100000\n");
  file("cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n");
  host::HostRoots roots{(dir_ / "proc").string(), (dir_ / "cgroup").string(), false, 4};
  auto info = host::probeHost(roots);
  EXPECT_EQ(info.cgroup_version, "v1");
  EXPECT_FALSE(info.cgroup_cpu_limit);
  EXPECT_FALSE(info.cgroup_memory_limit);
  EXPECT_EQ(info.effective_cpus, 4);

  roots.cgroup = (dir_ / "nothing-here").string();
  info = host::probeHost(roots);
  EXPECT_EQ(info.cgroup_version, "");
  EXPECT_EQ(info.effective_cpus, 4);
  EXPECT_FALSE(info.memory_total);
}

TEST_F(HostProbeTest, PluginDescribesTheFakeHost) {
  file("proc/meminfo", "MemTotal: 4096 kB\nMemAvailable: 2048 kB\n");
  file("proc/self/cgroup", "0::/\n");
  file("cgroup/cpu.max", "100000 100000\n");
  file("cgroup/memory.max", "1048576\n");
  auto plugin = host_.createResourceDiscovery(
      "host",
      json{{"proc_root", (dir_ / "proc").string()}, {"cgroup_root", (dir_ / "cgroup").string()}}
          .dump());
  EXPECT_EQ(plugin->discover(R"({"name": "gpu", "amount": 1})").status, DH_DECLINED);
  auto described = plugin->describe();
  ASSERT_TRUE(described.ok()) << described.error;
  const json details = json::parse(described.json);
  EXPECT_EQ(details["cores"]["effective"], 1);
  EXPECT_EQ(details["cores"]["cgroup_limit"], 1.0);
  EXPECT_EQ(details["memory"]["total_bytes"], 4096 * 1024);
  EXPECT_EQ(details["memory"]["available_bytes"], 2048 * 1024);
  EXPECT_EQ(details["memory"]["cgroup_limit_bytes"], 1048576);
  EXPECT_EQ(details["cgroup"], "v2");
}

}  // namespace
}  // namespace dockhand::agent
