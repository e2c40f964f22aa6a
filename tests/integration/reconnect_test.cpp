// Work outlives the agent's connection (protocol.md 6.6): a two-stage job (examples/
// decommission: maps write shuffle blocks, reduces read them) on two real agents under the
// real driver, one agent's connection cut for 5 s through a TCP proxy while its maps run.
// The agent keeps its tasks and blocks, reconnects and resumes; the driver holds it for its
// grace window: the job finishes with no task rerun and no map recomputed.
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "support/agent_command.h"
#include "support/process.h"
#include "support/shuffle_job.h"
#include "support/tcp_proxy.h"

namespace dockhand::testing {
namespace {

namespace fs = std::filesystem;
using std::chrono_literals::operator""s;
using std::chrono_literals::operator""ms;

class ReconnectTest : public ::testing::Test {
 protected:
  fs::path writeJob(int map_seconds) {
    return writeShuffleJob(dir.path(), std::to_string(map_seconds));
  }

  std::unique_ptr<ChildProcess> startDriver(const fs::path& job) {
    auto driver =
        startJobDriver(job, {"--min-agents", "2", "--timeout", "120", "--log-level", "info"},
                       port_file_, dir.path() / "driver.log", port_);
    EXPECT_NE(port_, 0) << driver->output();
    return driver;
  }

  std::unique_ptr<ChildProcess> startAgent(const std::string& id, int driver_port) {
    const fs::path config = dir.path() / (id + ".json");
    writeFile(config, R"({"block_port": 0, "reconnect_timeout_ms": 30000})");
    const AgentCommand command{.config = config,
                               .driver_url = "ws://127.0.0.1:" + std::to_string(driver_port) + "/",
                               .executor_id = id,
                               .app_id = "reconnect-test",
                               .work_dir = dir.path() / ("work-" + id)};
    return std::make_unique<ChildProcess>(command.argv(), (dir.path() / (id + ".log")).string());
  }

  bool allMapsStarted() const {
    for (int m = 0; m < kShuffleMaps; ++m) {
      if (!fs::exists(dir.path() / ("started-" + std::to_string(m)))) return false;
    }
    return true;
  }

  static std::string logs(const ChildProcess& a, const ChildProcess& b) {
    return "\n--- agent-a:\n" + a.output() + "\n--- agent-b:\n" + b.output();
  }

  TempDir dir;
  fs::path port_file_ = dir.path() / "port";
  int port_ = 0;
};

TEST_F(ReconnectTest, AFiveSecondCutLosesNoTaskAndNoBlock) {
  auto driver = startDriver(writeJob(8));
  TcpProxy proxy(port_);
  auto a = startAgent("agent-a", proxy.port());
  auto b = startAgent("agent-b", port_);
  ASSERT_TRUE(waitUntil([&] { return allMapsStarted(); }, 30s)) << driver->output() << logs(*a, *b);

  proxy.cut(5000ms);
  ASSERT_TRUE(waitUntil([&] { return contains(a->output(), "reconnecting for up to"); }, 10s))
      << logs(*a, *b);
  ASSERT_TRUE(waitUntil([&] { return contains(a->output(), "resumed with driver"); }, 30s))
      << driver->output() << logs(*a, *b);
  EXPECT_TRUE(a->running()) << "the agent kept going";

  ASSERT_EQ(driver->waitExit(90s), 0) << driver->output() << logs(*a, *b);
  const std::string out = driver->output();
  EXPECT_TRUE(contains(out, "job shuffle SUCCEEDED")) << out << logs(*a, *b);
  EXPECT_TRUE(contains(out, "0 retries, 0 relaunched after agent loss")) << out;
  EXPECT_TRUE(contains(out, "0 map tasks rerun for lost blocks")) << out;
  EXPECT_TRUE(contains(out, "agent 'agent-a' resumed")) << out;
  for (const auto& line : linesStartingWith(out, "map-")) {
    EXPECT_TRUE(contains(line, "FINISHED") && contains(line, "attempts=1")) << line;
  }
  for (const auto& line : linesStartingWith(out, "reduce-")) {
    EXPECT_TRUE(contains(line, "FINISHED") && contains(line, "attempts=1")) << line;
  }
  EXPECT_GE(proxy.forwarded(), 2u) << "agent-a connected through the proxy twice";
  int on_a = 0;
  for (const auto& line : linesStartingWith(out, "map-")) on_a += contains(line, "agent-a");
  EXPECT_GT(on_a, 0) << "no map ran on the agent that was cut off\n" << out;
}

TEST_F(ReconnectTest, AnAgentBackAfterTheGraceWindowIsRefusedAndStopsItsTasks) {
  // The agent tries for 30 s, the driver holds it for 1 s: the resume is refused.
  const fs::path config = dir.path() / "driver.json";
  writeFile(config, R"({"agent_reconnect_grace_ms": 1000})");
  std::vector<std::string> argv = {
      driverBinary(),      "serve",    "--listen",      "127.0.0.1:0", "--port-file",
      port_file_.string(), "--config", config.string(), "--log-level", "info"};
  auto driver = std::make_unique<ChildProcess>(argv, (dir.path() / "driver.log").string());
  ASSERT_TRUE(waitUntil([&] { return fs::exists(port_file_); }, 10s)) << driver->output();
  port_ = std::stoi(readFile(port_file_));
  TcpProxy proxy(port_);
  auto a = startAgent("agent-a", proxy.port());
  ASSERT_TRUE(waitUntil([&] { return contains(a->output(), "Successfully registered"); }, 10s))
      << a->output();
  proxy.cut(3000ms);
  EXPECT_EQ(a->waitExit(30s), toInt(ExitCode::kDriverLost)) << a->output() << driver->output();
  EXPECT_TRUE(contains(a->output(), "not_resumable")) << a->output();
  EXPECT_TRUE(contains(driver->output(), "agent 'agent-a' lost")) << driver->output();
}

}  // namespace
}  // namespace dockhand::testing
