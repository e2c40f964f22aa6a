// Integration tests of the real driver with real agents, all as processes on 127.0.0.1.
#include <signal.h>

#include <filesystem>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "support/agent_command.h"
#include "support/process.h"

namespace dockhand::testing {
namespace {

using std::chrono_literals::operator""s;

class ClusterTest : public ::testing::Test {
 protected:
  // Starts `dockhand-driver` with `args` and waits for its port file.
  std::unique_ptr<ChildProcess> startDriver(std::vector<std::string> args) {
    std::vector<std::string> argv = {driverBinary()};
    argv.insert(argv.end(), args.begin(), args.end());
    argv.emplace_back("--port-file");
    argv.push_back(port_file_.string());
    auto driver = std::make_unique<ChildProcess>(argv, (dir.path() / "driver.log").string());
    EXPECT_TRUE(waitUntil([&] { return std::filesystem::exists(port_file_); }, 10s))
        << driver->output();
    port_ = std::stoi(readFile(port_file_));
    return driver;
  }
  std::unique_ptr<ChildProcess> startAgent(const std::string& id, const std::string& log) {
    // A killed driver stays gone here: the agent tries to resume for 1.5 s, not 60 s.
    const std::filesystem::path config = dir.path() / (log + ".json");
    writeFile(config, R"({"reconnect_timeout_ms": 1500})");
    AgentCommand command{.config = config,
                         .driver_url = "ws://127.0.0.1:" + std::to_string(port_) + "/",
                         .executor_id = id,
                         .app_id = "cluster-test",
                         .work_dir = dir.path() / ("work-" + id + "-" + log)};
    return std::make_unique<ChildProcess>(command.argv(), (dir.path() / log).string());
  }
  static bool registered(ChildProcess& agent) {
    return agent.output().find("Successfully registered") != std::string::npos;
  }

  TempDir dir;
  std::filesystem::path port_file_ = dir.path() / "port";
  int port_ = 0;
};

TEST_F(ClusterTest, AgentsRegisterAndADuplicateIdIsRefused) {
  auto driver = startDriver({"serve", "--listen", "127.0.0.1:0"});
  auto first = startAgent("exec-1", "first.log");
  ASSERT_TRUE(waitUntil([&] { return registered(*first); }, 10s)) << first->output();
  auto second = startAgent("exec-1", "second.log");
  EXPECT_EQ(second->waitExit(10s), toInt(ExitCode::kRegistrationRefused)) << second->output();
  EXPECT_NE(second->output().find("exec-1"), std::string::npos) << second->output();
  EXPECT_NE(second->output().find("duplicate_executor"), std::string::npos) << second->output();
  auto other = startAgent("exec-2", "other.log");
  EXPECT_TRUE(waitUntil([&] { return registered(*other); }, 10s)) << other->output();
  EXPECT_TRUE(first->running());
  EXPECT_TRUE(driver->running());
}

TEST_F(ClusterTest, AgentExitsWithDriverLostWhenTheDriverIsKilled) {
  auto pid_file = dir.path() / "task.pid";
  auto job = dir.path() / "job.json";
  writeFile(job, R"({"name": "long", "tasks": [{"name": "sleeper", "shell": "echo $$ > )" +
                     pid_file.string() + R"(; exec sleep 300"}]})");
  auto driver = startDriver(
      {"run", job.string(), "--local-agents", "0", "--min-agents", "1", "--listen", "127.0.0.1:0"});
  auto agent = startAgent("exec-1", "agent.log");
  ASSERT_TRUE(waitUntil([&] { return !readFile(pid_file).empty(); }, 15s))
      << agent->output() << driver->output();
  pid_t task = std::stoi(readFile(pid_file));
  driver->signal(SIGKILL);
  EXPECT_EQ(agent->waitExit(15s), toInt(ExitCode::kDriverLost)) << agent->output();
  EXPECT_TRUE(waitUntil([&] { return processGone(task); }, 5s)) << "task " << task << " survived";
}

}  // namespace
}  // namespace dockhand::testing
