// Fault injection with the real programs: the driver killed mid-job, a network partition
// between driver and agent (a network namespace and a veth pair), a very large number of short
// tasks through one agent, and plugin calls that never return. Every wait is bounded.
//
// Other faults are covered where their feature is tested: a destination disk that fills up,
// a peer killed mid-transfer and an agent killed mid-write in decommission_test.cpp and
// shuffle_job_decommission_test.cpp. (Over 600 lines: each fault needs the same real driver and
// agents around it; they share this file's helpers for starting and killing them.)
#include <dirent.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "dockhand/protocol/messages.h"
#include "support/agent_command.h"
#include "support/fake_driver.h"
#include "support/http_client.h"
#include "support/process.h"
#include "support/tmpfs_mount.h"

namespace dockhand::testing {
namespace {

namespace fs = std::filesystem;
namespace proto = dockhand::protocol;
using nlohmann::json;
using std::chrono_literals::operator""ms;
using std::chrono_literals::operator""s;

// True when no process (zombies aside) is left in process group `pgid`.
bool groupGone(pid_t pgid) {
  DIR* proc = ::opendir("/proc");
  if (proc == nullptr) return false;
  bool gone = true;
  while (dirent* entry = ::readdir(proc)) {
    const std::string name = entry->d_name;
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    const std::string stat = readFile("/proc/" + name + "/stat");
    const auto close = stat.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream fields(stat.substr(close + 2));
    char state = 0;
    long ppid = 0;
    long pgrp = 0;
    if (!(fields >> state >> ppid >> pgrp)) continue;
    if (pgrp == pgid && state != 'Z') {
      gone = false;
      break;
    }
  }
  ::closedir(proc);
  return gone;
}

// A pid a task wrote to `path` (one line), once the line is complete.
std::optional<pid_t> pidIn(const fs::path& path) {
  const std::string text = readFile(path);
  if (text.empty() || text.back() != '\n') return std::nullopt;
  return static_cast<pid_t>(std::stol(text));
}

// The integer after `key` in `text` (e.g. "sum=" in the driver's summary), or -1.
long long numberAfter(const std::string& text, const std::string& key) {
  const auto at = text.find(key);
  if (at == std::string::npos) return -1;
  return std::stoll(text.substr(at + key.size()));
}

class FaultInjectionTest : public ::testing::Test {
 protected:
  // Starts `dockhand-driver` with `args` and waits for its port file.
  std::unique_ptr<ChildProcess> startDriver(std::vector<std::string> args,
                                            const std::vector<std::string>& env = {}) {
    std::vector<std::string> argv = {driverBinary()};
    argv.insert(argv.end(), args.begin(), args.end());
    argv.emplace_back("--port-file");
    argv.push_back(port_file_.string());
    auto driver = std::make_unique<ChildProcess>(argv, (dir.path() / "driver.log").string(), env);
    // The driver reads the whole job before it listens: 100,000 tasks take seconds, and much
    // longer under ThreadSanitizer.
    if (!waitUntil([&] { return fs::exists(port_file_); }, 120s)) {
      ADD_FAILURE() << "the driver wrote no port file within 120 s\n" << driver->output();
      return driver;
    }
    port_ = std::stoi(readFile(port_file_));
    return driver;
  }
  // Whether `driver` gets 3 more heartbeats within 5 s: the agent's core thread goes on.
  static bool heartbeatsGoOn(const FakeDriver& driver) {
    auto count = [&] {
      std::size_t n = 0;
      for (const auto& frame : driver.history()) n += frame.type == "Heartbeat";
      return n;
    };
    const std::size_t before = count();
    return waitUntil([&] { return count() >= before + 3; }, 5s);
  }
  // An agent of the real driver; `prefix` runs it (e.g. inside a network namespace).
  std::unique_ptr<ChildProcess> startAgent(const std::string& id, const std::string& driver_host,
                                           const std::string& hostname, int cores,
                                           std::vector<std::string> prefix = {}) {
    std::vector<std::string> argv = std::move(prefix);
    // A driver that is gone stays gone here: the agent tries to resume for 1.5 s, not 60 s.
    const std::filesystem::path config = dir.path() / (id + "-agent.json");
    writeFile(config, R"({"reconnect_timeout_ms": 1500})");
    const AgentCommand command{
        .config = config,
        .driver_url = "ws://" + driver_host + ":" + std::to_string(port_) + "/",
        .executor_id = id,
        .app_id = "faults",
        .cores = cores,
        .hostname = hostname,
        .work_dir = dir.path() / ("work-" + id)};
    for (const std::string& arg : command.argv()) argv.push_back(arg);
    return std::make_unique<ChildProcess>(argv, (dir.path() / (id + ".log")).string());
  }
  // The command line of an agent of `driver` with the config file `config`, working in work/.
  std::vector<std::string> faultsAgent(const fs::path& config, const FakeDriver& driver,
                                       const std::string& id, int cores) {
    return AgentCommand{.config = config,
                        .driver_url = driver.url(),
                        .executor_id = id,
                        .app_id = "faults",
                        .cores = cores,
                        .work_dir = dir.path() / "work"}
        .argv();
  }
  fs::path writeJson(const std::string& name, const json& value) {
    auto path = dir.path() / name;
    writeFile(path, value.dump());
    return path;
  }

  TempDir dir;
  fs::path port_file_ = dir.path() / "port";
  int port_ = 0;
};

// ---- the driver SIGKILLed mid-job ---------------------------------------------------------

TEST_F(FaultInjectionTest, DriverKilledMidJobEveryAgentExitsAndNoTaskProcessSurvives) {
  // Four long tasks on two agents; each task also starts a child of its own (same process
  // group), which must go too.
  const fs::path pids = dir.path() / "pids";
  fs::create_directories(pids);
  json tasks = json::array();
  for (int i = 0; i < 4; ++i) {
    const std::string tag = (pids / std::to_string(i)).string();
    std::string shell = "sleep 300 & echo $! > ";
    shell.append(tag).append(".child; echo $$ > ").append(tag).append(".task; wait");
    tasks.push_back({{"name", "sleeper-" + std::to_string(i)}, {"shell", shell}});
  }
  const auto job = writeJson("job.json", {{"name", "long"}, {"tasks", tasks}});
  auto driver = startDriver(
      {"run", job.string(), "--local-agents", "0", "--min-agents", "2", "--listen", "127.0.0.1:0"});
  auto a1 = startAgent("a1", "127.0.0.1", "127.0.0.1", 2);
  auto a2 = startAgent("a2", "127.0.0.1", "127.0.0.1", 2);

  std::vector<pid_t> started;
  ASSERT_TRUE(waitUntil(
      [&] {
        started.clear();
        for (int i = 0; i < 4; ++i) {
          for (const char* kind : {".task", ".child"}) {
            auto pid = pidIn(pids / (std::to_string(i) + kind));
            if (!pid) return false;
            started.push_back(*pid);
          }
        }
        return true;
      },
      20s))
      << driver->output() << a1->output() << a2->output();

  driver->signal(SIGKILL);
  EXPECT_EQ(a1->waitExit(10s), toInt(ExitCode::kDriverLost)) << a1->output();
  EXPECT_EQ(a2->waitExit(10s), toInt(ExitCode::kDriverLost)) << a2->output();
  for (std::size_t i = 0; i < started.size(); ++i) {
    const pid_t pid = started[i];
    EXPECT_TRUE(waitUntil([&] { return processGone(pid); }, 5s))
        << "process " << pid << " survived its agent";
    if (i % 2 == 0) {  // a task: it led its own process group
      EXPECT_TRUE(waitUntil([&] { return groupGone(pid); }, 5s))
          << "process group " << pid << " still has members";
    }
  }
}

// ---- a network partition between driver and agent ------------------------------------------

// A network namespace joined to this one by a veth pair (HOST_IP on this side, NS_IP inside),
// removed again in every path. Names and addresses derive from this process's pid so that
// parallel runs do not collide.
class NetworkNamespace {
 public:
  // nullptr, with `why` set, when the kernel or the sandbox refuses.
  static std::unique_ptr<NetworkNamespace> create(const fs::path& log, std::string& why) {
    std::unique_ptr<NetworkNamespace> ns(new NetworkNamespace(log));
    ns->removeLeftovers();  // of an earlier run that had this pid and was killed
    for (const std::string& step :
         {"netns add " + ns->name_,
          "link add " + ns->host_if_ + " type veth peer name " + ns->ns_if_ + " netns " + ns->name_,
          "addr add " + ns->host_ip_ + "/30 dev " + ns->host_if_,
          "link set " + ns->host_if_ + " up",
          "-n " + ns->name_ + " addr add " + ns->ns_ip_ + "/30 dev " + ns->ns_if_,
          "-n " + ns->name_ + " link set " + ns->ns_if_ + " up",
          "-n " + ns->name_ + " link set lo up"}) {
      if (!ns->ip(step)) {
        why = "'ip " + step + "' failed: " + readFile(log);
        return nullptr;
      }
    }
    return ns;
  }
  ~NetworkNamespace() { removeLeftovers(); }
  NetworkNamespace(const NetworkNamespace&) = delete;
  NetworkNamespace& operator=(const NetworkNamespace&) = delete;

  static std::string ipProgram() {
    for (const char* path : {"/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"}) {
      if (::access(path, X_OK) == 0) return path;
    }
    return {};
  }
  // Cuts the link: packets stop both ways, no connection sees a reset.
  bool partition() { return ip("link set " + host_if_ + " down"); }
  std::vector<std::string> execPrefix() const { return {ipProgram(), "netns", "exec", name_}; }
  const std::string& hostIp() const { return host_ip_; }
  const std::string& nsIp() const { return ns_ip_; }

 private:
  explicit NetworkNamespace(fs::path log) : log_(std::move(log)) {
    const auto pid = static_cast<unsigned>(::getpid());
    const std::string tag = std::to_string(pid % 1000000);
    name_ = "dhf" + tag;
    host_if_ = "dhf" + tag + "h";
    ns_if_ = "dhf" + tag + "n";
    const std::string net =
        "10." + std::to_string(200 + pid % 50) + "." + std::to_string((pid / 50) % 256) + ".";
    host_ip_ = net + "1";
    ns_ip_ = net + "2";
  }
  void removeLeftovers() {
    ip("link del " + host_if_);  // removes both ends
    ip("netns del " + name_);
  }
  bool ip(const std::string& args) {
    const std::string command = ipProgram() + " " + args + " >" + log_.string() + " 2>&1";
    return std::system(command.c_str()) == 0;
  }

  fs::path log_;
  std::string name_, host_if_, ns_if_, host_ip_, ns_ip_;
};

TEST_F(FaultInjectionTest, PartitionedAgentExitsDriverLostAndItsTaskRunsElsewhere) {
  if (::geteuid() != 0) GTEST_SKIP() << "creating a network namespace needs root";
  if (NetworkNamespace::ipProgram().empty()) GTEST_SKIP() << "no 'ip' program (iproute2)";
  std::string why;
  auto ns = NetworkNamespace::create(dir.path() / "ip.log", why);
  if (!ns) GTEST_SKIP() << "no network namespace here: " << why;

  // Short heartbeats and timeouts on both sides, so that the partition shows in seconds.
  const auto config =
      writeJson("driver.json", {{"heartbeat_interval_ms", 200},
                                {"agent_timeout_ms", 1500},
                                {"agent_reconnect_grace_ms", 1000},
                                {"properties", {{"dockhand.driver.timeout_ms", "1500"}}}});
  // The first attempt (inside the namespace) claims the marker and sleeps; the relaunch finds
  // it taken and finishes at once.
  const fs::path marker = dir.path() / "claimed";
  const fs::path pid_file = dir.path() / "inside.pid";
  const auto job =
      writeJson("job.json",
                {{"name", "partition"},
                 {"tasks",
                  {{{"name", "one"},
                    {"shell", "if mkdir " + marker.string() + " 2>/dev/null; then echo $$ > " +
                                  pid_file.string() + "; exec sleep 300; else echo rerun; fi"}}}}});
  auto driver = startDriver({"run", job.string(), "--local-agents", "0", "--min-agents", "1",
                             "--listen", "0.0.0.0:0", "--config", config.string(), "--log-level",
                             "info", "--timeout", "60"});
  auto inside = startAgent("inside", ns->hostIp(), ns->nsIp(), 2, ns->execPrefix());
  std::optional<pid_t> task;
  ASSERT_TRUE(waitUntil([&] { return (task = pidIn(pid_file)).has_value(); }, 20s))
      << driver->output() << inside->output();
  auto outside = startAgent("outside", "127.0.0.1", "127.0.0.1", 2);
  ASSERT_TRUE(
      waitUntil([&] { return contains(outside->output(), "Successfully registered"); }, 10s))
      << outside->output();

  ASSERT_TRUE(ns->partition()) << readFile(dir.path() / "ip.log");
  // The agent hears nothing from the driver for dockhand.driver.timeout_ms and gives up.
  EXPECT_EQ(inside->waitExit(15s), toInt(ExitCode::kDriverLost)) << inside->output();
  EXPECT_TRUE(contains(inside->output(), "silent for")) << inside->output();
  EXPECT_TRUE(waitUntil([&] { return processGone(*task) && groupGone(*task); }, 5s))
      << "the partitioned agent's task " << *task << " survived it";
  // The driver hears nothing from the agent for agent_timeout_ms, holds it for its grace
  // window in case it comes back, then drops it and runs the task on the other agent.
  EXPECT_EQ(driver->waitExit(20s), 0) << driver->output();
  const std::string out = driver->output();
  EXPECT_TRUE(contains(out, "agent 'inside' disconnected")) << out;
  EXPECT_TRUE(contains(out, "agent 'inside' lost: not back within 1000 ms")) << out;
  EXPECT_TRUE(contains(out, "1 relaunched after agent loss")) << out;
  EXPECT_TRUE(contains(out, "outside")) << out;
  EXPECT_TRUE(contains(out, "rerun")) << out;
}

// ---- a very large number of short tasks through one agent ----------------------------------

// How many tasks: DOCKHAND_FAULT_TASKS when set (a quick local run), else 100,000.
std::size_t manyTaskCount() {
  if (const char* v = std::getenv("DOCKHAND_FAULT_TASKS"); v != nullptr && *v != '\0') {
    return static_cast<std::size_t>(std::stoul(v));
  }
  return 100000;
}

TEST_F(FaultInjectionTest, ManyShortTasksThroughOneAgentLoseNoStatusUpdate) {
  const std::size_t n = manyTaskCount();
  // Task i reports i + 1 as its output: the sum checks that every task's result arrived once.
  json tasks = json::array();
  for (std::size_t i = 0; i < n; ++i) {
    tasks.push_back({{"name", "t" + std::to_string(i)},
                     {"runner", "instant"},
                     {"payload", {{"value", i + 1}}}});
  }
  const auto job =
      writeJson("many.json", {{"name", "many"}, {"aggregate", "sum"}, {"tasks", tasks}});
  // The agent makes a directory for every task (and the driver removes them all at the end):
  // on a tmpfs this costs little, on a busy disk it would be most of the run.
  TmpfsMount tmp(dir.path() / "tmp", std::size_t{512} << 20);
  if (!tmp.mounted()) GTEST_SKIP() << tmp.error();
  const auto agent_config = writeJson(
      "agent.json", {{"plugins", {{{"name", "process"}}, {{"path", DOCKHAND_INSTANT_RUNNER}}}},
                     {"plugin_manifest_dir", (dir.path() / "no-manifests").string()},
                     {"log_level", "warn"}});
  auto driver =
      startDriver({"run", job.string(), "--local-agents", "1", "--cores", "64", "--agent-config",
                   agent_config.string(), "--quiet", "--log-level", "info", "--timeout", "600"},
                  {"TMPDIR=" + (dir.path() / "tmp").string()});
  const auto code = driver->waitExit(660s);
  const std::string out = driver->output();
  ASSERT_EQ(code, 0) << out.substr(0, 4000);
  const std::string total = std::to_string(n);
  EXPECT_TRUE(contains(out, "job many SUCCEEDED: " + total + " tasks, " + total +
                                " finished, 0 failed, 0 not run; 0 retries, 0 relaunched"))
      << out;
  EXPECT_EQ(numberAfter(out, "sum="), static_cast<long long>(n * (n + 1) / 2)) << out;
  // A second terminal status for a task (or one for a task the driver did not launch there)
  // would be counted here.
  EXPECT_TRUE(contains(out, "0 stray status update(s) ignored")) << out;
}

// ---- plugin calls that never return ---------------------------------------------------------

TEST_F(FaultInjectionTest, DiscoveryThatNeverReturnsFailsStartupNamingThePlugin) {
  FakeDriver driver;
  const int block_port = unusedPort();
  const auto config = writeJson(
      "agent.json", {{"plugins", {{{"name", "process"}}, {{"path", DOCKHAND_HANG_DISCOVERY}}}},
                     {"plugin_manifest_dir", (dir.path() / "no-manifests").string()},
                     {"resources", {{"widget", {{"amount", 1}}}}},
                     {"plugin_call_timeout_ms", 3000},
                     {"block_port", block_port}});
  ChildProcess agent(faultsAgent(config, driver, "d1", 1), (dir.path() / "agent.log").string());
  ASSERT_TRUE(driver.waitForType("RetrieveAppConfig", 10s)) << agent.output();
  // While discover() hangs, the block server still answers.
  const std::string status_url = "http://127.0.0.1:" + std::to_string(block_port) + "/v1/status";
  EXPECT_EQ(httpGet(status_url).status, 200) << agent.output();
  EXPECT_EQ(agent.waitExit(15s), toInt(ExitCode::kResourcesUnavailable)) << agent.output();
  const std::string out = agent.output();
  EXPECT_TRUE(contains(out,
                       "resource 'widget': plugin 'hang-discovery' failed: discover() did "
                       "not return within 3000 ms"))
      << out;
  EXPECT_FALSE(driver.waitForRegistration(10ms)) << "the agent must not register";
}

// allocate() runs on the core thread when a task with the resource starts: a call that never
// returns fails that task after the timeout, later tasks with the resource fail at once (the
// core thread never waits for the stuck plugin again), and the agent goes on serving.
TEST_F(FaultInjectionTest, AllocateThatNeverReturnsFailsItsTaskAndTheAgentKeepsServing) {
  FakeDriver::Options options;
  options.resource_profile.task_resources = {{"widget", 1.0}};
  FakeDriver driver(options);
  const auto config = writeJson(
      "agent.json", {{"plugins", {{{"name", "process"}}, {{"path", DOCKHAND_HANG_ALLOCATE}}}},
                     {"plugin_manifest_dir", (dir.path() / "no-manifests").string()},
                     {"resources", {{"widget", {{"amount", 1}}}}},
                     {"plugin_call_timeout_ms", 1000}});
  ChildProcess agent(faultsAgent(config, driver, "w1", 2), (dir.path() / "agent.log").string());
  ASSERT_TRUE(driver.waitForRegistration(10s)) << agent.output();
  auto launch = [&](std::uint64_t id, bool widget) {
    proto::LaunchTask message;
    message.task.task_id = id;
    message.task.name = "task " + std::to_string(id);
    message.task.payload = {{"shell", "true"}};
    if (widget) message.task.resources = {{"widget", {"0"}}};
    driver.send(proto::makeMessage(message));
  };
  auto failed_with = [&](std::uint64_t id, const std::string& reason) {
    return driver.waitFor(
        [&](const proto::Envelope& e) {
          if (e.type != "StatusUpdate") return false;
          auto update = proto::decodeBody<proto::StatusUpdate>(e.body);
          return update.task_id == id && update.state == proto::TaskState::kFailed &&
                 contains(update.reason, "plugin 'hang-allocate' could not allocate widget") &&
                 contains(update.reason, reason);
        },
        10s);
  };
  launch(1, true);
  // "plugin 'hang-allocate' could not allocate widget {...}: allocate() did not return ..."
  EXPECT_TRUE(failed_with(1, "allocate() did not return within 1000 ms (plugin_call_timeout_ms)"))
      << agent.output();

  EXPECT_TRUE(heartbeatsGoOn(driver)) << agent.output();
  launch(2, true);
  EXPECT_TRUE(failed_with(2,
                          "plugin 'hang-allocate' is stuck: allocate() did not return within "
                          "1000 ms (plugin_call_timeout_ms); restart the agent to use it again"))
      << agent.output();
  launch(3, false);
  EXPECT_TRUE(driver.waitForStatus(3, proto::TaskState::kFinished, 10s)) << agent.output();
}

TEST_F(FaultInjectionTest, MigrationThatNeverReturnsLeavesTheAgentServingAndExitBounded) {
  FakeDriver driver;  // heartbeats every 200 ms
  const auto config = writeJson("agent.json", {{"stop_grace_ms", 1000},
                                               {"decommission",
                                                {{"migration", {DOCKHAND_HANG_MIGRATION}},
                                                 {"check_interval_ms", 100},
                                                 {"deadline_ms", 6000}}}});
  ChildProcess agent(faultsAgent(config, driver, "m1", 2), (dir.path() / "agent.log").string());
  ASSERT_TRUE(driver.waitForRegistration(10s)) << agent.output();
  proto::LaunchTask launch;
  launch.task.task_id = 1;
  launch.task.name = "writer";
  launch.task.payload = {{"shell", "head -c 65536 /dev/urandom > $DOCKHAND_OUTPUT_DIR/rdd_4_4"}};
  driver.send(proto::makeMessage(launch));
  ASSERT_TRUE(driver.waitForStatus(1, proto::TaskState::kFinished)) << agent.output();

  agent.signal(SIGPWR);
  ASSERT_TRUE(waitUntil([&] { return contains(agent.output(), "will never return"); }, 10s))
      << agent.output();
  // The core thread goes on: heartbeats keep coming, the status output is refreshed, and a
  // task launched now is answered (LOST: the agent is decommissioning).
  EXPECT_TRUE(heartbeatsGoOn(driver)) << agent.output();
  const HttpReply status = httpGet(driver.agentBlockUrl() + "/v1/status");
  ASSERT_EQ(status.status, 200) << agent.output();
  EXPECT_EQ(json::parse(status.body)["state"], "decommissioning") << status.body;
  launch.task.task_id = 2;
  launch.task.name = "late";
  launch.task.payload = {{"shell", "true"}};
  driver.send(proto::makeMessage(launch));
  EXPECT_TRUE(driver.waitFor(
      [](const proto::Envelope& e) {
        if (e.type != "StatusUpdate") return false;
        auto update = proto::decodeBody<proto::StatusUpdate>(e.body);
        return update.task_id == 2 && update.state == proto::TaskState::kLost;
      },
      5s))
      << agent.output();

  // The deadline passes with the block not moved; the exit waits stop_grace_ms for the stuck
  // call, then goes without it.
  EXPECT_EQ(agent.waitExit(15s), toInt(ExitCode::kDecommissionIncomplete)) << agent.output();
  EXPECT_TRUE(contains(agent.output(), "did not return from migrate() within 1000 ms"))
      << agent.output();
}

// An agent with the process runner and the fixture runner at `runner_path`, its runner calls
// bounded by 1000 ms and its exit by stop_grace_ms 1000.
class StuckRunnerTest : public FaultInjectionTest {
 protected:
  std::unique_ptr<ChildProcess> startAgentWith(const char* runner_path) {
    const auto config =
        writeJson("agent.json", {{"plugins", {{{"name", "process"}}, {{"path", runner_path}}}},
                                 {"plugin_manifest_dir", (dir.path() / "no-manifests").string()},
                                 {"plugin_call_timeout_ms", 1000},
                                 {"stop_grace_ms", 1000}});
    return std::make_unique<ChildProcess>(faultsAgent(config, driver, "r1", 4),
                                          (dir.path() / "agent.log").string());
  }
  void launch(std::uint64_t id, const std::string& runner, const json& payload) {
    proto::LaunchTask message;
    message.task.task_id = id;
    message.task.name = "task " + std::to_string(id);
    message.task.runner = runner;
    message.task.payload = payload;
    driver.send(proto::makeMessage(message));
  }
  // The agent still serves: heartbeats come, /v1/status answers, a process task runs.
  // It names the stuck runner and call there.
  void expectServing(ChildProcess& agent, std::uint64_t process_task, const std::string& runner,
                     const std::string& stuck_call) {
    EXPECT_TRUE(heartbeatsGoOn(driver)) << agent.output();
    const HttpReply status = httpGet(driver.agentBlockUrl() + "/v1/status");
    ASSERT_EQ(status.status, 200) << agent.output();
    const json stuck = json::parse(status.body).at("stuck_runners");
    EXPECT_EQ(stuck.size(), 1u) << status.body;
    EXPECT_EQ(stuck.value(runner, ""),
              stuck_call + " did not return within 1000 ms (plugin_call_timeout_ms)")
        << status.body;
    launch(process_task, "process", {{"shell", "true"}});
    EXPECT_TRUE(driver.waitForStatus(process_task, proto::TaskState::kFinished, 10s))
        << agent.output();
  }
  // SIGTERM: the agent exits with its usual code without waiting for the stuck call.
  void expectStopsWithoutTheStuckCall(ChildProcess& agent) {
    agent.signal(SIGTERM);
    EXPECT_EQ(agent.waitExit(15s), 0) << agent.output();
    EXPECT_TRUE(contains(agent.output(), "did not return from a call")) << agent.output();
    EXPECT_TRUE(contains(agent.output(), "exiting without waiting for them")) << agent.output();
  }

  FakeDriver driver;  // heartbeats every 200 ms
};

TEST_F(StuckRunnerTest, LaunchThatNeverReturnsFailsItsTasksAndTheAgentKeepsServing) {
  auto agent = startAgentWith(DOCKHAND_HANG_LAUNCH);
  ASSERT_TRUE(driver.waitForRegistration(10s)) << agent->output();
  launch(1, "hang-launch", {{"value", 1}});
  ASSERT_TRUE(driver.waitForStatus(1, proto::TaskState::kFinished)) << agent->output();
  launch(2, "hang-launch", {{"hang", true}});
  launch(3, "hang-launch", {{"value", 3}});  // queued behind the stuck launch
  ASSERT_TRUE(waitUntil([&] { return contains(agent->output(), "it will never return"); }, 10s))
      << agent->output();

  auto stuck = driver.waitForStatus(2, proto::TaskState::kFailed, 10s);
  ASSERT_TRUE(stuck) << agent->output();
  EXPECT_EQ(stuck->reason,
            "task runner 'hang-launch': launch() of task 2 did not return within 1000 ms "
            "(plugin_call_timeout_ms)");
  auto dropped = driver.waitForStatus(3, proto::TaskState::kFailed, 5s);
  ASSERT_TRUE(dropped) << agent->output();
  EXPECT_TRUE(contains(dropped->reason, "task runner 'hang-launch' is stuck (launch() of task 2"))
      << dropped->reason;
  EXPECT_TRUE(contains(dropped->reason, "launch() of this task was not made")) << dropped->reason;
  // Later launches to the stuck runner fail at once, naming the call it is stuck in.
  launch(4, "hang-launch", {{"value", 4}});
  auto refused = driver.waitForStatus(4, proto::TaskState::kFailed, 5s);
  ASSERT_TRUE(refused) << agent->output();
  EXPECT_TRUE(contains(refused->reason,
                       "task runner 'hang-launch' is stuck: launch() of task 2 did not return"))
      << refused->reason;
  EXPECT_TRUE(contains(agent->output(), "task runner 'hang-launch' is stuck")) << agent->output();

  expectServing(*agent, 5, "hang-launch", "launch() of task 2");
  expectStopsWithoutTheStuckCall(*agent);
}

TEST_F(StuckRunnerTest, KillThatNeverReturnsReportsTheTaskLostAndTheAgentKeepsServing) {
  auto agent = startAgentWith(DOCKHAND_HANG_KILL);
  ASSERT_TRUE(driver.waitForRegistration(10s)) << agent->output();
  launch(1, "hang-kill", json::object());
  launch(2, "hang-kill", json::object());
  ASSERT_TRUE(driver.waitForStatus(1, proto::TaskState::kRunning)) << agent->output();
  ASSERT_TRUE(driver.waitForStatus(2, proto::TaskState::kRunning)) << agent->output();
  proto::KillTask kill;
  kill.task_id = 1;
  kill.reason = "no longer needed";
  driver.send(proto::makeMessage(kill));

  auto lost = driver.waitForStatus(1, proto::TaskState::kLost, 10s);
  ASSERT_TRUE(lost) << agent->output();
  EXPECT_EQ(lost->reason,
            "task runner 'hang-kill': kill() of task 1 did not return within 1000 ms "
            "(plugin_call_timeout_ms); the task could not be killed and its state is unknown");
  // A kill of its other task fails at once: LOST, naming the stuck call.
  kill.task_id = 2;
  driver.send(proto::makeMessage(kill));
  auto second = driver.waitForStatus(2, proto::TaskState::kLost, 5s);
  ASSERT_TRUE(second) << agent->output();
  EXPECT_TRUE(
      contains(second->reason, "task runner 'hang-kill' is stuck: kill() of task 1 did not return"))
      << second->reason;
  launch(3, "hang-kill", json::object());
  EXPECT_TRUE(driver.waitForStatus(3, proto::TaskState::kFailed, 5s)) << agent->output();

  expectServing(*agent, 4, "hang-kill", "kill() of task 1");
  expectStopsWithoutTheStuckCall(*agent);
}

// Spark's task reaper: a plugin that cannot stop a task asks the agent to end. The driver hears
// the task KILLED, then RemoveExecutor naming the plugin and why; the agent exits 12 without
// destroying the plugin whose thread may still run.
TEST_F(StuckRunnerTest, PluginThatCannotRecoverEndsTheAgentWithTaskUnkillable) {
  auto agent = startAgentWith(DOCKHAND_UNRECOVERABLE);
  ASSERT_TRUE(driver.waitForRegistration(10s)) << agent->output();
  launch(1, "unrecoverable", json::object());
  launch(2, "process", {{"shell", "sleep 30"}});
  ASSERT_TRUE(driver.waitForStatus(1, proto::TaskState::kRunning)) << agent->output();
  ASSERT_TRUE(driver.waitForStatus(2, proto::TaskState::kRunning)) << agent->output();
  proto::KillTask kill;
  kill.task_id = 1;
  driver.send(proto::makeMessage(kill));

  auto killed = driver.waitForStatus(1, proto::TaskState::kKilled, 10s);
  ASSERT_TRUE(killed) << agent->output();
  EXPECT_EQ(killed->reason, "task 1 ignored its kill; its thread is left");
  auto removed = driver.waitForType("RemoveExecutor", 10s);
  ASSERT_TRUE(removed) << agent->output();
  EXPECT_EQ(removed->body.value("reason", ""),
            "plugin 'unrecoverable' cannot recover: task 1 did not return after its kill");
  // The other task is stopped as on any exit, and its end reported.
  EXPECT_TRUE(driver.waitForStatus(2, proto::TaskState::kKilled, 10s)) << agent->output();
  EXPECT_EQ(agent->waitExit(15s), 12) << agent->output();
  EXPECT_FALSE(contains(agent->output(), "unrecoverable runner destroyed")) << agent->output();
}

}  // namespace
}  // namespace dockhand::testing
