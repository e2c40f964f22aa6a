// Resource discovery and assignment with the real programs: an agent that cannot find what
// its config asks for refuses to start; a Spark resources file is taken as given and its
// addresses are registered; and a real driver runs GPU tasks on an agent with two fake GPUs
// without ever giving one GPU to two tasks at once.
#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "dockhand/protocol/messages.h"
#include "support/agent_command.h"
#include "support/fake_driver.h"
#include "support/process.h"

namespace dockhand::testing {
namespace {

namespace proto = dockhand::protocol;
using nlohmann::json;
using std::chrono_literals::operator""s;
using ::testing::HasSubstr;

// A task's shell line: sleeps `seconds` and writes the GPUs it was given, with when it started
// and ended, to ${JOB_DIR}/out/<name> (through a .tmp file, so a reader sees it whole).
std::string recordGpus(const std::string& name, const char* seconds) {
  const std::string out = "'${JOB_DIR}/out/" + name;
  std::string line = "s=$(date +%s%N); sleep ";
  line.append(seconds).append("; e=$(date +%s%N); ");
  line.append(R"(echo "${CUDA_VISIBLE_DEVICES:-none} $s $e" > )").append(out).append(".tmp'");
  line.append(" && mv ").append(out).append(".tmp' ").append(out).append("'");
  return line;
}

class ResourcesTest : public ::testing::Test {
 protected:
  // An agent config loading the process runner and the static plugin with `statics`, asking
  // for `resources`.
  std::string agentConfig(const json& statics, const json& resources) {
    const auto path = dir.path() / "agent.json";
    writeFile(
        path,
        json{{"plugins",
              {{{"name", "process"}}, {{"name", "static"}, {"config", {{"resources", statics}}}}}},
             {"plugin_manifest_dir", (dir.path() / "no-manifests").string()},
             {"resources", resources}}
            .dump(2));
    return path.string();
  }
  std::vector<std::string> agentArgs(const std::string& config, const FakeDriver& driver) {
    return AgentCommand{.config = config,
                        .driver_url = driver.url(),
                        .executor_id = "r1",
                        .app_id = "resources",
                        .work_dir = dir.path() / "work"}
        .argv();
  }

  void runQuarterGpuJob(const std::vector<std::string>& driver_args);

  TempDir dir;
};

TEST_F(ResourcesTest, TooFewAddressesStopTheAgentNamingResourceFoundAndRequested) {
  FakeDriver driver;
  const auto config = agentConfig({{"gpu", {"0"}}}, {{"gpu", {{"amount", 2}}}});
  ChildProcess agent(agentArgs(config, driver), (dir.path() / "agent.log").string());
  ASSERT_EQ(agent.waitExit(20s), toInt(ExitCode::kResourcesUnavailable)) << agent.output();
  EXPECT_THAT(agent.output(),
              HasSubstr("resource 'gpu': 2 requested, but static found only 1 address(es): [0]"));
  for (const auto& frame : driver.history()) {
    EXPECT_NE(frame.type, "RegisterExecutor") << "registered without the resources it needs";
  }
}

TEST_F(ResourcesTest, SparkResourcesFileIsTakenAsGivenAndRegistered) {
  FakeDriver driver;
  // The static plugin would find only one GPU: the file's two must be used as they are, and
  // only what the file does not cover (the FPGA) is discovered.
  const auto config = agentConfig({{"gpu", {"0"}}, {"fpga", {"f0"}}},
                                  {{"gpu", {{"amount", 2}}}, {"fpga", {{"amount", 1}}}});
  const auto file = dir.path() / "resources.json";
  writeFile(file, R"([{"id": {"componentName": "spark.executor", "resourceName": "gpu"},
                       "addresses": ["3", "5"]}])");
  auto args = agentArgs(config, driver);
  args.emplace_back("--resourcesFile");
  args.push_back(file.string());
  ChildProcess agent(args, (dir.path() / "agent.log").string());
  auto frame = driver.waitForType("RegisterExecutor", 20s);
  ASSERT_TRUE(frame) << agent.output();
  const auto registration = proto::decodeBody<proto::RegisterExecutor>(frame->body);
  ASSERT_EQ(registration.resources.count("gpu"), 1u) << agent.output();
  EXPECT_EQ(registration.resources.at("gpu").addresses, (std::vector<std::string>{"3", "5"}));
  ASSERT_EQ(registration.resources.count("fpga"), 1u) << agent.output();
  EXPECT_EQ(registration.resources.at("fpga").addresses, (std::vector<std::string>{"f0"}));
  EXPECT_TRUE(agent.running()) << agent.output();
}

// A driver whose app profile asks for `amount` of `name`, found by `script`.
FakeDriver::Options profileAsking(const std::string& name, std::int64_t amount,
                                  const std::string& script) {
  FakeDriver::Options options;
  options.resource_profile.executor_resources[name] = {amount, script, ""};
  return options;
}

// The resources of the agent's RegisterExecutor, once it registered.
std::map<std::string, proto::ResourceInfo> registered(FakeDriver& driver, ChildProcess& agent) {
  auto frame = driver.waitForType("RegisterExecutor", 20s);
  EXPECT_TRUE(frame) << agent.output();
  if (!frame) return {};
  return proto::decodeBody<proto::RegisterExecutor>(frame->body).resources;
}

// Spark runs its configured discovery plugins and then, always, its script plugin: a script
// from the driver works on any executor. So here, on a node whose plugin list does not name
// `script` (and whose static plugin knows only an FPGA), and on one with the default list.
TEST_F(ResourcesTest, ProfileDiscoveryScriptRunsAsTheChainsLastStepWhateverThePluginList) {
  const std::string script = dir.path() / "gpus.sh";
  writeFile(script, "#!/bin/sh\necho '{\"name\": \"gpu\", \"addresses\": [\"0\", \"1\"]}'\n");
  std::filesystem::permissions(script, std::filesystem::perms::owner_all);
  for (const bool default_plugins : {false, true}) {
    SCOPED_TRACE(default_plugins ? "default plugin list" : "process and static");
    FakeDriver driver(profileAsking("gpu", 2, script));
    std::string config = agentConfig({{"fpga", {"f0"}}}, json::object());
    if (default_plugins) {
      config = (dir.path() / "default.json").string();
      writeFile(config,
                json{{"plugin_manifest_dir", (dir.path() / "no-manifests").string()}}.dump());
    }
    ChildProcess agent(agentArgs(config, driver), (dir.path() / "agent.log").string());
    const auto resources = registered(driver, agent);
    ASSERT_EQ(resources.count("gpu"), 1u) << agent.output();
    EXPECT_EQ(resources.at("gpu").addresses, (std::vector<std::string>{"0", "1"}));
    EXPECT_THAT(agent.output(), HasSubstr("found by script"));
    EXPECT_TRUE(agent.running()) << agent.output();
  }
}

// An operator who must not run what a driver names says so, and the script never runs.
TEST_F(ResourcesTest, ProfileDiscoveryScriptsCanBeForbidden) {
  const auto ran = dir.path() / "script-ran";
  const std::string script = dir.path() / "gpus.sh";
  writeFile(script, "#!/bin/sh\ntouch '" + ran.string() +
                        "'\necho '{\"name\": \"gpu\", \"addresses\": [\"0\"]}'\n");
  std::filesystem::permissions(script, std::filesystem::perms::owner_all);
  FakeDriver driver(profileAsking("gpu", 1, script));
  const auto config = dir.path() / "forbid.json";
  writeFile(config, json{{"plugin_manifest_dir", (dir.path() / "no-manifests").string()},
                         {"allow_profile_discovery_scripts", false}}
                        .dump());
  ChildProcess agent(agentArgs(config.string(), driver), (dir.path() / "agent.log").string());
  ASSERT_EQ(agent.waitExit(20s), toInt(ExitCode::kResourcesUnavailable)) << agent.output();
  EXPECT_THAT(agent.output(), HasSubstr("allow_profile_discovery_scripts is false"));
  EXPECT_THAT(agent.output(), HasSubstr("resource 'gpu': 1 requested, none found"));
  EXPECT_FALSE(std::filesystem::exists(ran)) << "the forbidden script ran";
}

// Spark drops a request for an amount of 0: no discovery runs for it and it stops nothing.
TEST_F(ResourcesTest, AmountZeroRunsNoDiscoveryAndDoesNotBlockStartup) {
  const auto ran = dir.path() / "script-ran";
  const std::string script = dir.path() / "gpus.sh";
  writeFile(script, "#!/bin/sh\ntouch '" + ran.string() + "'\necho '{\"name\": \"gpu\"}'\n");
  std::filesystem::permissions(script, std::filesystem::perms::owner_all);
  FakeDriver driver(profileAsking("gpu", 0, script));
  const auto config = dir.path() / "default.json";
  writeFile(config, json{{"plugin_manifest_dir", (dir.path() / "no-manifests").string()}}.dump());
  ChildProcess agent(agentArgs(config.string(), driver), (dir.path() / "agent.log").string());
  const auto resources = registered(driver, agent);
  EXPECT_EQ(resources.count("gpu"), 0u) << agent.output();
  EXPECT_FALSE(std::filesystem::exists(ran)) << "discovery ran for an amount of 0";
  EXPECT_TRUE(agent.running()) << agent.output();
}

// Spark's getGpusResources.sh on a machine without nvidia-smi: its pipeline turns nothing into
// one empty line, and it prints {"name": "gpu", "addresses": [""]}. Spark would register a GPU
// "" and hand tasks CUDA_VISIBLE_DEVICES= ; the agent refuses it, naming the script.
TEST_F(ResourcesTest, SparkGpuScriptWithoutNvidiaSmiIsRefusedNamingTheScript) {
  // Only sed on the PATH: the script's own lines, unchanged, after it.
  std::filesystem::create_directories(dir.path() / "bin");
  std::filesystem::create_symlink("/bin/sed", dir.path() / "bin" / "sed");
  const std::string script = dir.path() / "getGpusResources.sh";
  writeFile(script, "#!/bin/bash\nPATH='" + (dir.path() / "bin").string() +
                        "'\n"
                        "ADDRS=`nvidia-smi --query-gpu=index --format=csv,noheader | sed -e ':a' "
                        "-e 'N' -e'$!ba' -e 's/\\n/\",\"/g'`\n"
                        "echo {\\\"name\\\": \\\"gpu\\\", \\\"addresses\\\":[\\\"$ADDRS\\\"]}\n");
  std::filesystem::permissions(script, std::filesystem::perms::owner_all);
  FakeDriver driver(profileAsking("gpu", 1, script));
  const auto config = dir.path() / "default.json";
  writeFile(config, json{{"plugin_manifest_dir", (dir.path() / "no-manifests").string()}}.dump());
  ChildProcess agent(agentArgs(config.string(), driver), (dir.path() / "agent.log").string());
  ASSERT_EQ(agent.waitExit(20s), toInt(ExitCode::kResourcesUnavailable)) << agent.output();
  EXPECT_THAT(agent.output(),
              HasSubstr("discovery script " + script + " printed an empty address"));
  EXPECT_THAT(agent.output(), HasSubstr(R"({"name": "gpu", "addresses":[""]})"));
  for (const auto& frame : driver.history()) {
    EXPECT_NE(frame.type, "RegisterExecutor") << "registered a GPU with an empty address";
  }
}

// One task's record: the GPUs it saw and when it ran.
struct Record {
  std::string name;
  std::string gpus;
  long long start = 0;
  long long end = 0;
};

TEST_F(ResourcesTest, GpuTasksOnTwoFakeGpusNeverShareOne) {
  const auto config = agentConfig({{"gpu", {"0", "1"}}}, {{"gpu", {{"amount", 2}}}});
  const auto out = dir.path() / "out";
  std::filesystem::create_directories(out);
  constexpr int kTasks = 8;
  json tasks = json::array();
  for (int i = 0; i < kTasks; ++i) {
    const std::string name = "gpu-" + std::to_string(i);
    tasks.push_back(
        {{"name", name}, {"resources", {{"gpu", 1}}}, {"shell", recordGpus(name, "0.2")}});
  }
  const auto job = dir.path() / "gpu-job.json";
  writeFile(job, json{{"name", "gpu-job"}, {"max_attempts", 1}, {"tasks", tasks}}.dump(2));
  // Four cores for two GPUs: the cores would allow four tasks at once, the GPUs only two.
  ChildProcess driver({driverBinary(), "run", job.string(), "--local-agents", "1", "--cores", "4",
                       "--agent-config", config, "--timeout", "60"},
                      (dir.path() / "driver.log").string());
  ASSERT_EQ(driver.waitExit(90s), 0) << driver.output();

  std::vector<Record> records;
  for (int i = 0; i < kTasks; ++i) {
    const std::string name = "gpu-" + std::to_string(i);
    std::istringstream in(readFile(out / name));
    Record r;
    r.name = name;
    ASSERT_TRUE(in >> r.gpus >> r.start >> r.end) << name << ": " << readFile(out / name);
    EXPECT_TRUE(r.gpus == "0" || r.gpus == "1")
        << name << " saw CUDA_VISIBLE_DEVICES=" << r.gpus << ", not exactly one of the two GPUs";
    EXPECT_LT(r.start, r.end);
    records.push_back(r);
  }
  bool any_overlap = false;
  for (std::size_t a = 0; a < records.size(); ++a) {
    for (std::size_t b = a + 1; b < records.size(); ++b) {
      const bool overlap = records[a].start < records[b].end && records[b].start < records[a].end;
      if (!overlap) continue;
      any_overlap = true;
      EXPECT_NE(records[a].gpus, records[b].gpus)
          << records[a].name << " and " << records[b].name << " ran at the same time on GPU "
          << records[a].gpus;
    }
  }
  EXPECT_TRUE(any_overlap) << "two GPUs and four cores: some tasks should have run together";
}

// Runs twelve quarter-GPU tasks under the real driver on one agent with two GPUs, with
// `driver_args` added to its command line, and checks that they shared the GPUs, at most four
// tasks on one at a time.
void ResourcesTest::runQuarterGpuJob(const std::vector<std::string>& driver_args) {
  const auto config = agentConfig({{"gpu", {"0", "1"}}}, {{"gpu", {{"amount", 2}}}});
  const auto out = dir.path() / "out";
  std::filesystem::create_directories(out);
  constexpr int kTasks = 12;
  json tasks = json::array();
  for (int i = 0; i < kTasks; ++i) {
    const std::string name = "q-" + std::to_string(i);
    tasks.push_back(
        {{"name", name}, {"resources", {{"gpu", 0.25}}}, {"shell", recordGpus(name, "0.3")}});
  }
  const auto job = dir.path() / "quarter-job.json";
  writeFile(job, json{{"name", "quarter-job"}, {"max_attempts", 1}, {"tasks", tasks}}.dump(2));
  std::vector<std::string> argv = {driverBinary(),
                                   "run",
                                   job.string(),
                                   "--local-agents",
                                   "1",
                                   "--cores",
                                   "16",
                                   "--agent-config",
                                   config,
                                   "--timeout",
                                   "60"};
  argv.insert(argv.end(), driver_args.begin(), driver_args.end());
  ChildProcess driver(argv, (dir.path() / "driver.log").string());
  ASSERT_EQ(driver.waitExit(90s), 0) << driver.output();

  std::vector<Record> records;
  for (int i = 0; i < kTasks; ++i) {
    const std::string name = "q-" + std::to_string(i);
    std::istringstream in(readFile(out / name));
    Record r;
    r.name = name;
    ASSERT_TRUE(in >> r.gpus >> r.start >> r.end) << name << ": " << readFile(out / name);
    EXPECT_TRUE(r.gpus == "0" || r.gpus == "1") << name << " saw " << r.gpus;
    records.push_back(r);
  }
  // At each task's start, count the tasks holding its GPU then (itself included).
  int most = 0;
  for (const auto& a : records) {
    int holding = 0;
    for (const auto& b : records) {
      if (b.gpus == a.gpus && b.start <= a.start && a.start < b.end) ++holding;
    }
    EXPECT_LE(holding, 4) << "more than four quarter-GPU tasks on GPU " << a.gpus;
    most = std::max(most, holding);
  }
  EXPECT_GE(most, 2) << "quarter-GPU tasks should have shared a GPU";
}

// A quarter of a GPU per task, set both in the job and in the driver config's profile.
TEST_F(ResourcesTest, QuarterGpuTasksShareAGpuFourAtATime) {
  const auto driver_config = dir.path() / "driver.json";
  writeFile(driver_config,
            json{{"resource_profile", {{"id", 0}, {"task_resources", {{"gpu", 0.25}}}}}}.dump());
  runQuarterGpuJob({"--config", driver_config.string()});
}

// The same with no driver config: the profile the driver serves takes the job's amount, so
// the agent allows the sharing (with a whole GPU per task it would refuse the second task on
// a GPU, and the job, one attempt per task, would fail).
TEST_F(ResourcesTest, QuarterGpuTasksShareAGpuWithTheAmountTakenFromTheJob) {
  runQuarterGpuJob({});
}

}  // namespace
}  // namespace dockhand::testing
