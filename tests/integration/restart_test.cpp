// Work outlives the agent's process: a two-stage job (examples/decommission: maps write
// shuffle blocks, reduces read them) on two real agents under the real driver, one agent
// restarted in the middle of its maps.
//
// * A restart in place (SIGUSR2) into a different build of the agent (the same program with
//   its version string changed, renamed over the file as a package upgrade does): the process
//   keeps its PID, resumes its session with the driver and keeps its blocks; no map reruns.
// * A crash (SIGKILL) and a start of the agent again on the same work directory: the blocks
//   on disk are verified and re-announced; one truncated while the agent was down is
//   quarantined, and the driver reruns only the map that made it.
// * A restart in place with 20 process tasks running: they go on in the same process and are
//   taken back by the new program, each reported once with its own end; none runs again.
// After a crash, the task the agent was running does not survive: it is reported LOST and run
// again, with no attempt counted.
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "support/agent_command.h"
#include "support/http_client.h"
#include "support/process.h"
#include "support/shuffle_job.h"

namespace dockhand::testing {
namespace {

namespace fs = std::filesystem;
using std::chrono_literals::operator""s;

std::string readBytes(const fs::path& path) {
  std::string bytes(fs::file_size(path), '\0');
  std::ifstream in(path, std::ios::binary);
  in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return bytes;
}

class RestartTest : public ::testing::Test {
 protected:
  std::unique_ptr<ChildProcess> startDriver() {
    auto driver = startJobDriver(writeShuffleJob(dir.path(), "2"),
                                 {"--min-agents", "2", "--timeout", "120", "--log-level", "info"},
                                 port_file_, dir.path() / "driver.log", port_);
    EXPECT_NE(port_, 0) << driver->output();
    return driver;
  }

  // One core each: an agent runs its two maps one after the other, so that it holds the blocks
  // of its first while its second runs.
  std::unique_ptr<ChildProcess> startAgent(const std::string& id, const std::string& program,
                                           const std::string& log) {
    const fs::path config = dir.path() / (id + ".json");
    writeFile(config, R"({"block_port": 0, "reconnect_timeout_ms": 30000, "plugin_dirs": [")" +
                          (fs::path(agentBinary()).parent_path().parent_path() / "lib" /
                           "dockhand" / "plugins")
                              .string() +
                          R"("]})");
    AgentCommand command{.config = config,
                         .driver_url = "ws://127.0.0.1:" + std::to_string(port_) + "/",
                         .executor_id = id,
                         .app_id = "restart-test",
                         .cores = 1,
                         .work_dir = dir.path() / ("work-" + id)};
    std::vector<std::string> argv = command.argv();
    argv[0] = program;
    return std::make_unique<ChildProcess>(argv, (dir.path() / log).string());
  }

  // The shuffle blocks in an agent's block directory.
  std::vector<fs::path> blocksOf(const std::string& id) const {
    std::vector<fs::path> out;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir.path() / ("work-" + id) / "blocks", ec)) {
      if (e.path().filename().string().rfind("shuffle_", 0) == 0) out.push_back(e.path());
    }
    return out;
  }

  // The blocks the driver knows on agent `id` (its /v1/executors), 0 when it cannot say.
  std::size_t driverBlocksOn(const std::string& id) const {
    const HttpReply reply = httpGet("http://127.0.0.1:" + std::to_string(port_) + "/v1/executors");
    const auto json = nlohmann::json::parse(reply.body, nullptr, false);
    if (reply.status != 200 || json.is_discarded()) return 0;
    for (const auto& e : json.value("executors", nlohmann::json::array())) {
      if (e.value("executor_id", "") == id) return e.value("blocks", std::size_t{0});
    }
    return 0;
  }
  // Agent `id` finished its first map: the driver knows both of its blocks.
  bool firstMapDone(const std::string& id) const {
    return driverBlocksOn(id) >= static_cast<std::size_t>(kShuffleReducers);
  }

  // A copy of the agent's program at <dir>/bin/<name>, with its version string changed to
  // `version` when given (the same length as the real one): a different build.
  fs::path copyAgent(const std::string& name, const std::string& version = {}) {
    fs::create_directories(dir.path() / "bin");
    fs::path to = dir.path() / "bin" / name;
    if (version.empty()) {
      fs::copy_file(agentBinary(), to, fs::copy_options::overwrite_existing);
      return to;
    }
    std::string bytes = readBytes(agentBinary());
    {
      const std::string from = std::string(DOCKHAND_VERSION) + '\0';
      EXPECT_EQ(version.size(), from.size() - 1);
      std::size_t changed = 0;
      for (auto at = bytes.find(from); at != std::string::npos; at = bytes.find(from, at + 1)) {
        bytes.replace(at, version.size(), version);
        ++changed;
      }
      EXPECT_GT(changed, 0u) << "no version string " << DOCKHAND_VERSION << " in the program";
    }
    std::ofstream(to, std::ios::binary)
        .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    fs::permissions(to, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                            fs::perms::others_read | fs::perms::others_exec);
    return to;
  }

  static std::string logs(const ChildProcess& a, const ChildProcess& b) {
    return "\n--- agent-a:\n" + a.output() + "\n--- agent-b:\n" + b.output();
  }

  TempDir dir;
  fs::path port_file_ = dir.path() / "port";
  int port_ = 0;
};

TEST_F(RestartTest, ARestartInPlaceIntoANewBuildKeepsTheBlocksAndTheProcess) {
  const fs::path program = copyAgent("dockhand");
  const fs::path next_build = copyAgent("dockhand.new", "9.9.9");
  auto driver = startDriver();
  auto a = startAgent("agent-a", program.string(), "agent-a.log");
  auto b = startAgent("agent-b", agentBinary(), "agent-b.log");
  ASSERT_TRUE(waitUntil([&] { return firstMapDone("agent-a"); }, 60s))
      << driver->output() << logs(*a, *b);
  const std::size_t held = blocksOf("agent-a").size();

  // As a package upgrade does: the new program renamed over the old one's path, then the
  // restart in place.
  fs::rename(next_build, program);
  a->signal(SIGUSR2);
  ASSERT_TRUE(waitUntil([&] { return contains(a->output(), "dockhand 9.9.9 starting"); }, 30s))
      << logs(*a, *b);
  ASSERT_TRUE(waitUntil([&] { return contains(a->output(), "after a restart"); }, 30s))
      << driver->output() << logs(*a, *b);
  EXPECT_TRUE(a->running()) << "the same process goes on";
  EXPECT_TRUE(contains(a->output(), std::to_string(held) + " block(s) from an earlier run "
                                                           "adopted, 0 quarantined"))
      << a->output();

  ASSERT_EQ(driver->waitExit(90s), 0) << driver->output() << logs(*a, *b);
  const std::string out = driver->output();
  EXPECT_TRUE(contains(out, "job shuffle SUCCEEDED")) << out << logs(*a, *b);
  EXPECT_TRUE(contains(out, "0 map tasks rerun for lost blocks")) << out;
  EXPECT_TRUE(contains(out, ", 0 failed fetches")) << out;
  EXPECT_TRUE(contains(out, "agent 'agent-a' resumed")) << out;
  EXPECT_TRUE(contains(out, "0 retries")) << "a task stopped by the restart costs no attempt\n"
                                          << out << logs(*a, *b);
  EXPECT_FALSE(contains(a->output(), "RemoveExecutor")) << a->output();
}

TEST_F(RestartTest, ACrashedAgentStartedAgainReannouncesItsVerifiedBlocks) {
  auto driver = startDriver();
  auto a = startAgent("agent-a", agentBinary(), "agent-a.log");
  auto b = startAgent("agent-b", agentBinary(), "agent-b.log");
  ASSERT_TRUE(waitUntil([&] { return firstMapDone("agent-a"); }, 60s))
      << driver->output() << logs(*a, *b);
  a->signal(SIGKILL);
  ASSERT_TRUE(a->waitExit(10s).has_value());

  // While it is down, its largest block loses its second half.
  std::vector<fs::path> held = blocksOf("agent-a");
  ASSERT_FALSE(held.empty());
  fs::path torn = held.front();
  for (const auto& p : held) {
    if (fs::file_size(p) > fs::file_size(torn)) torn = p;
  }
  ASSERT_GT(fs::file_size(torn), 1u) << "every block is empty";
  fs::resize_file(torn, fs::file_size(torn) / 2);
  const std::string map = torn.filename().string().substr(std::string("shuffle_0_").size(), 1);

  auto again = startAgent("agent-a", agentBinary(), "agent-a-again.log");
  ASSERT_TRUE(waitUntil([&] { return contains(again->output(), "after a restart"); }, 30s))
      << driver->output() << logs(*again, *b);
  const std::string log = again->output();
  EXPECT_TRUE(contains(log, "quarantined " + torn.filename().string())) << log;
  EXPECT_TRUE(contains(log, "torn or damaged")) << log;
  EXPECT_TRUE(contains(log, std::to_string(held.size() - 1) +
                                " block(s) from an earlier run adopted, 1 quarantined"))
      << log;
  EXPECT_TRUE(fs::exists(dir.path() / "work-agent-a" / "blocks" / ".quarantine" / torn.filename()));

  ASSERT_EQ(driver->waitExit(90s), 0) << driver->output() << logs(*again, *b);
  const std::string out = driver->output();
  EXPECT_TRUE(contains(out, "job shuffle SUCCEEDED")) << out << logs(*again, *b);
  EXPECT_TRUE(contains(out, "1 map tasks rerun for lost blocks")) << out << logs(*again, *b);
  EXPECT_TRUE(contains(out, "agent 'agent-a' resumed")) << out;
  EXPECT_TRUE(contains(out, "0 retries")) << out;
  // Only the map whose block was torn ran twice for it.
  for (const auto& line : linesStartingWith(out, "map-")) {
    if (line.rfind("map-" + map + " ", 0) != 0) {
      EXPECT_FALSE(contains(line, "FAILED")) << line;
    }
  }
}

// A restart in place into a new build with 20 process tasks running and 200 blocks held: each
// task goes on in the same process, is taken back by the new program, and ends FINISHED with its
// own output, reported once; none is run again, and no block is made again.
TEST_F(RestartTest, ARestartInPlaceKeepsItsRunningProcessTasks) {
  constexpr int kTasks = 20;
  constexpr int kBlocksPerMaker = 10;
  const fs::path go = dir.path() / "go";
  const fs::path job = dir.path() / "job.json";
  {
    // 20 makers leave 10 blocks each; 20 waiters, each reading one of them, then wait for `go`.
    nlohmann::json tasks = nlohmann::json::array();
    for (int m = 0; m < kTasks; ++m) {
      nlohmann::json outputs = nlohmann::json::array();
      std::string script;
      for (int r = 0; r < kBlocksPerMaker; ++r) {
        const std::string id = "shuffle_0_" + std::to_string(m) + "_" + std::to_string(r);
        outputs.push_back(id);
        script.append("echo ")
            .append(id)
            .append(" > \"$DOCKHAND_OUTPUT_DIR/")
            .append(id)
            .append("\"; ");
      }
      tasks.push_back(
          {{"name", "make-" + std::to_string(m)}, {"shell", script}, {"outputs", outputs}});
    }
    for (int i = 0; i < kTasks; ++i) {
      tasks.push_back(
          {{"name", "t-" + std::to_string(i)},
           {"inputs", {"shuffle_0_" + std::to_string(i) + "_0"}},
           {"shell", "touch '" + (dir.path() / ("started-" + std::to_string(i))).string() +
                         "'; while [ ! -e '" + go.string() + "' ]; do sleep 0.05; done; echo out-" +
                         std::to_string(i)}});
    }
    writeFile(job, nlohmann::json{{"name", "survive"}, {"tasks", tasks}}.dump());
  }
  auto driver = startJobDriver(job, {"--min-agents", "1", "--timeout", "120"}, port_file_,
                               dir.path() / "driver.log", port_);
  ASSERT_NE(port_, 0) << driver->output();
  const fs::path program = copyAgent("dockhand");
  const fs::path next_build = copyAgent("dockhand.new", "9.9.9");
  const fs::path config = dir.path() / "agent.json";
  writeFile(config, R"({"block_port": 0, "reconnect_timeout_ms": 30000, "plugin_dirs": [")" +
                        (fs::path(agentBinary()).parent_path().parent_path() / "lib" / "dockhand" /
                         "plugins")
                            .string() +
                        R"("]})");
  AgentCommand command{.config = config,
                       .driver_url = "ws://127.0.0.1:" + std::to_string(port_) + "/",
                       .executor_id = "agent-s",
                       .app_id = "survive-test",
                       .cores = kTasks,
                       .work_dir = dir.path() / "work-s"};
  std::vector<std::string> argv = command.argv();
  argv[0] = program.string();
  ChildProcess agent(argv, (dir.path() / "agent-s.log").string());
  ASSERT_TRUE(waitUntil(
      [&] {
        for (int i = 0; i < kTasks; ++i) {
          if (!fs::exists(dir.path() / ("started-" + std::to_string(i)))) return false;
        }
        return true;
      },
      60s))
      << agent.output() << driver->output();

  fs::rename(next_build, program);
  agent.signal(SIGUSR2);
  ASSERT_TRUE(waitUntil([&] { return contains(agent.output(), "taken back run on"); }, 30s))
      << agent.output() << driver->output();
  const std::string log = agent.output();
  EXPECT_TRUE(contains(log, "dockhand 9.9.9 starting")) << log;
  EXPECT_TRUE(contains(log, "20 running task(s) go on in the next program; 0 cannot")) << log;
  EXPECT_TRUE(contains(log, "20 of 20 task(s) handed over by the previous program taken back"))
      << log;
  EXPECT_TRUE(contains(log,
                       "20 task(s) taken back run on, 0 the driver counted here did not "
                       "survive it"))
      << log;
  EXPECT_TRUE(agent.running()) << "the same process goes on";
  EXPECT_TRUE(contains(log, std::to_string(kTasks * kBlocksPerMaker) +
                                " block(s) from an earlier run adopted, 0 quarantined"))
      << log;

  writeFile(go, "");
  ASSERT_EQ(driver->waitExit(60s), 0) << driver->output() << agent.output();
  const std::string out = driver->output();
  EXPECT_TRUE(contains(out, "job survive SUCCEEDED")) << out << agent.output();
  EXPECT_TRUE(contains(out, "0 retries")) << out;
  EXPECT_TRUE(contains(out, "0 map tasks rerun for lost blocks, 0 failed fetches")) << out;
  EXPECT_FALSE(contains(out, "LOST")) << out;
  const auto lines = linesStartingWith(out, "t-");
  EXPECT_EQ(lines.size(), static_cast<std::size_t>(kTasks)) << out;
  for (const auto& line : lines) {
    const std::string name = line.substr(0, line.find(' '));
    EXPECT_TRUE(contains(line, "FINISHED")) << line;
    EXPECT_TRUE(contains(line, "out-" + name.substr(2))) << line;
  }
}

// A reload (SIGHUP, what `systemctl reload dockhand` sends): a changed log level applies at once,
// a setting that cannot change live is named and kept, a broken file changes nothing; the agent
// stays registered throughout.
TEST_F(RestartTest, AReloadAppliesTheLogLevelAndABrokenFileChangesNothing) {
  // Two tasks on one core: the first waits for the test; the second is launched after it, when
  // the reloaded log level shows in the agent's debug lines.
  const fs::path go = dir.path() / "go";
  const fs::path started = dir.path() / "started";
  const fs::path job = dir.path() / "job.json";
  writeFile(job, R"({"name": "reload", "tasks": [
      {"name": "wait", "shell": "touch ')" +
                     started.string() + R"('; while [ ! -e ')" + go.string() +
                     R"(' ]; do sleep 0.05; done"},
      {"name": "after", "shell": "true"}]})");
  auto driver = startJobDriver(job, {"--min-agents", "1", "--timeout", "120"}, port_file_,
                               dir.path() / "driver.log", port_);
  ASSERT_NE(port_, 0) << driver->output();
  const fs::path config = dir.path() / "agent.json";
  writeFile(config, R"({"block_port": 0, "log_level": "info", "keep_task_dirs": 100})");
  AgentCommand command{.config = config,
                       .driver_url = "ws://127.0.0.1:" + std::to_string(port_) + "/",
                       .executor_id = "agent-r",
                       .app_id = "reload-test",
                       .cores = 1,
                       .work_dir = dir.path() / "work-r"};
  ChildProcess agent(command.argv(), (dir.path() / "agent-r.log").string());
  ASSERT_TRUE(waitUntil([&] { return fs::exists(started); }, 30s))
      << agent.output() << driver->output();
  EXPECT_FALSE(contains(agent.output(), " debug ")) << agent.output();

  writeFile(config, R"({"block_port": 0, "log_level": "debug", "keep_task_dirs": 3,
                        "connect_tries": 9})");
  agent.signal(SIGHUP);
  ASSERT_TRUE(waitUntil([&] { return contains(agent.output(), "reload: /log_level"); }, 10s))
      << agent.output();
  std::string log = agent.output();
  EXPECT_TRUE(contains(log, R"(reload: /log_level changed from "info" to "debug")")) << log;
  EXPECT_TRUE(contains(log, "reload: /keep_task_dirs changed from 100 to 3")) << log;
  EXPECT_TRUE(contains(log, "reload: /connect_tries cannot change while the agent runs")) << log;

  // A broken file changes nothing and says why; the agent goes on, and reloads again after.
  writeFile(config, R"({"block_port": 0, "log_level": )");
  agent.signal(SIGHUP);
  ASSERT_TRUE(waitUntil([&] { return contains(agent.output(), "nothing changed"); }, 10s))
      << agent.output();
  EXPECT_TRUE(contains(agent.output(), "reload: the configuration does not load"))
      << agent.output();
  writeFile(config, R"({"block_port": 0, "log_level": "debug", "keep_task_dirs": 3,
                        "connect_tries": 9})");
  agent.signal(SIGHUP);
  ASSERT_TRUE(waitUntil([&] { return count(agent.output(), "reload: /connect_tries") == 2; }, 10s))
      << "the agent still reloads after a broken file\n"
      << agent.output();

  writeFile(go, "");
  ASSERT_EQ(driver->waitExit(60s), 0) << driver->output() << agent.output();
  EXPECT_TRUE(contains(driver->output(), "job reload SUCCEEDED")) << driver->output();
  EXPECT_TRUE(contains(agent.output(), " debug agent task_id=2: Got assigned task 2"))
      << agent.output();
}

}  // namespace
}  // namespace dockhand::testing
