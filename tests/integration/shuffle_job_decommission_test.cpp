// End to end: a two-stage job (examples/decommission: maps write shuffle blocks, reduces read
// them) on two real agents under the real driver. One agent is decommissioned while its map
// tasks still run; it must let them finish, migrate their blocks, and exit 0, and the
// reduces must read the migrated blocks: the job succeeds with the right sum and without
// running any map task twice.
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "support/agent_command.h"
#include "support/process.h"
#include "support/shuffle_job.h"
#include "support/test_pki.h"

namespace dockhand::testing {
namespace {

namespace fs = std::filesystem;
using std::chrono_literals::operator""s;

constexpr int kMaps = kShuffleMaps;
constexpr int kReducers = kShuffleReducers;

// Words in the example's input, counted the way `wc -w` does.
long countWords(const fs::path& dir) {
  long words = 0;
  for (int m = 1; m <= kMaps; ++m) {
    std::ifstream in(dir / ("part-" + std::to_string(m) + ".txt"));
    std::string word;
    while (in >> word) ++words;
  }
  return words;
}

std::string quotedBlockId(int map, int reduce) {
  return "\"shuffle_0_" + std::to_string(map) + "_" + std::to_string(reduce) + "\"";
}

class ShuffleJobDecommissionTest : public ::testing::Test {
 protected:
  const fs::path data_ = fs::path(DOCKHAND_SOURCE_DIR) / "examples" / "wordcount" / "data";

  // The example's job, with each map first leaving a marker (so that the test knows the
  // maps run) and taking a few seconds (so that they still run when the agent is told).
  // `library_tasks`: the same job as code in the agents (examples/jobs' "words" library).
  fs::path writeJob() { return library_tasks_ ? writeLibraryJob() : writeShellJob(); }

  fs::path writeShellJob() { return writeShuffleJob(dir.path(), map_seconds_); }

  fs::path writeLibraryJob() {
    nlohmann::json tasks = nlohmann::json::array();
    for (int m = 0; m < kMaps; ++m) {
      nlohmann::json outputs = nlohmann::json::array();
      for (int r = 0; r < kReducers; ++r)
        outputs.push_back(nlohmann::json::parse(quotedBlockId(m, r)));
      tasks.push_back(
          {{"name", "map-" + std::to_string(m)},
           {"partition", m},
           {"library", "words"},
           {"function", "map"},
           {"args",
            {{"file", (data_ / ("part-" + std::to_string(m + 1) + ".txt")).string()},
             {"reducers", kReducers},
             {"sleep_ms", 4000},
             {"started_file", (dir.path() / ("started-" + std::to_string(m))).string()}}},
           {"outputs", outputs}});
    }
    for (int r = 0; r < kReducers; ++r) {
      nlohmann::json inputs = nlohmann::json::array();
      for (int m = 0; m < kMaps; ++m) inputs.push_back(nlohmann::json::parse(quotedBlockId(m, r)));
      tasks.push_back({{"name", "reduce-" + std::to_string(r)},
                       {"partition", r},
                       {"library", "words"},
                       {"function", "reduce"},
                       {"inputs", inputs}});
    }
    fs::path job = dir.path() / "job.json";
    writeFile(job,
              nlohmann::json{
                  {"name", "shuffle"}, {"max_attempts", 2}, {"aggregate", "sum"}, {"tasks", tasks}}
                  .dump(2));
    return job;
  }

  // The agents' config: decommission on, blocks migrated by `plugin`; a fallback store
  // shared by both agents (the fallback plugin writes it, every block server reads it).
  // With `secret_file`, the agents authenticate (the driver must then require it too); with
  // `tls` (a tls object) they use TLS (so must the driver, and agent_scheme_ be "wss").
  fs::path writeAgentConfig(const std::string& plugin, const fs::path& secret_file = {},
                            const std::string& tls = {}) {
    fs::create_directories(fallback_);
    fs::path config = dir.path() / "agent.json";
    std::string auth =
        secret_file.empty() ? "" : R"("auth_secret_file": ")" + secret_file.string() + "\",\n ";
    if (!tls.empty()) auth += "\"tls\": " + tls + ",\n ";
    if (library_tasks_) {
      auth +=
          R"("plugins": [{"name": "process"}, {"name": "library", "config": {"libraries": {"words": ")" +
          std::string(DOCKHAND_EXAMPLE_JOB_LIBRARY) + "\"}}}],\n ";
    }
    writeFile(config, "{" + auth + R"("block_port": 0, "fallback_dir": ")" + fallback_.string() +
                          "\",\n \"decommission\": {\"enabled\": true, \"migration\": [\"" +
                          plugin + "\"], \"deadline_ms\": 60000, \"check_interval_ms\": 100}}\n");
    return config;
  }

  std::unique_ptr<ChildProcess> startDriver(const std::vector<std::string>& args) {
    std::vector<std::string> argv = {driverBinary()};
    argv.insert(argv.end(), args.begin(), args.end());
    for (const char* extra : {"--listen", "127.0.0.1:0", "--port-file"}) argv.emplace_back(extra);
    argv.push_back(port_file_.string());
    auto driver = std::make_unique<ChildProcess>(argv, (dir.path() / "driver.log").string());
    EXPECT_TRUE(waitUntil([&] { return fs::exists(port_file_); }, 10s)) << driver->output();
    port_ = std::stoi(readFile(port_file_));
    return driver;
  }

  std::unique_ptr<ChildProcess> startJob(const fs::path& job,
                                         const std::vector<std::string>& extra = {}) {
    std::vector<std::string> args = {"run",          job.string(), "--local-agents", "0",
                                     "--min-agents", "2",          "--timeout",      "120",
                                     "--log-level",  "info"};
    args.insert(args.end(), extra.begin(), extra.end());
    return startDriver(args);
  }

  std::unique_ptr<ChildProcess> startAgent(const std::string& id, const fs::path& config) {
    const AgentCommand command{
        .config = config,
        .driver_url = agent_scheme_ + "://127.0.0.1:" + std::to_string(port_) + "/",
        .executor_id = id,
        .app_id = "shuffle-decommission-test",
        .work_dir = dir.path() / ("work-" + id)};
    return std::make_unique<ChildProcess>(command.argv(), (dir.path() / (id + ".log")).string());
  }

  bool allMapsStarted() const { return shuffleMapsStarted(dir.path()); }

  // What every variant checks once the driver has exited.
  void expectJobSucceededWithoutMapReruns(const ChildProcess& driver, const std::string& logs) {
    const std::string out = driver.output();
    EXPECT_NE(out.find("job shuffle SUCCEEDED"), std::string::npos) << out << logs;
    EXPECT_NE(out.find("sum=" + std::to_string(countWords(data_))), std::string::npos)
        << out << logs;
    EXPECT_NE(out.find("0 map tasks rerun for lost blocks"), std::string::npos) << out << logs;
    EXPECT_NE(out.find("0 relaunched after agent loss"), std::string::npos) << out << logs;
    EXPECT_NE(out.find("agent 'agent-a' finished decommissioning and left"), std::string::npos)
        << out << logs;

    const auto maps = linesStartingWith(out, "map-");
    ASSERT_EQ(maps.size(), static_cast<std::size_t>(kMaps)) << out;
    int on_a = 0;
    for (const auto& line : maps) {
      EXPECT_NE(line.find("FINISHED"), std::string::npos) << line;
      EXPECT_NE(line.find("attempts=1"), std::string::npos) << "a map ran twice: " << line;
      if (line.find("agent-a") != std::string::npos) ++on_a;
    }
    EXPECT_GT(on_a, 0) << "no map ran on the decommissioned agent: nothing was migrated\n" << out;
    const auto reduces = linesStartingWith(out, "reduce-");
    ASSERT_EQ(reduces.size(), static_cast<std::size_t>(kReducers)) << out;
    for (const auto& line : reduces) {
      EXPECT_NE(line.find("FINISHED"), std::string::npos) << line;
      EXPECT_NE(line.find("agent-b"), std::string::npos) << "a reduce ran on the leaving agent";
    }
  }

  struct Cluster {
    std::unique_ptr<ChildProcess> driver;
    std::unique_ptr<ChildProcess> a;
    std::unique_ptr<ChildProcess> b;
  };
  // The job on agent-a and agent-b; agent-a gets SIGPWR once every map task runs. Checks what
  // every such run must show: agent-a exits 0, the job succeeds with no map rerun, and nothing
  // went to the fallback store. Returns the processes for further checks.
  Cluster sigpwrWithPeerMigration(const fs::path& agent_config,
                                  const std::vector<std::string>& driver_args = {}) {
    Cluster c;
    c.driver = startJob(writeJob(), driver_args);
    c.a = startAgent("agent-a", agent_config);
    c.b = startAgent("agent-b", agent_config);
    if (!waitUntil([&] { return allMapsStarted(); }, 30s)) {
      ADD_FAILURE() << "the map tasks did not all start\n"
                    << c.driver->output() << logs(*c.a, *c.b);
      return c;
    }
    c.a->signal(SIGPWR);
    EXPECT_EQ(c.a->waitExit(60s), 0) << logs(*c.a, *c.b);
    EXPECT_EQ(c.driver->waitExit(90s), 0) << c.driver->output() << logs(*c.a, *c.b);
    expectJobSucceededWithoutMapReruns(*c.driver, logs(*c.a, *c.b));
    EXPECT_TRUE(fs::is_empty(fallback_))
        << "peer migration wrote to the fallback store" << logs(*c.a, *c.b);
    return c;
  }

  static std::string logs(const ChildProcess& a, const ChildProcess& b) {
    return "\n--- agent-a:\n" + a.output() + "\n--- agent-b:\n" + b.output();
  }

  TempDir dir;
  fs::path port_file_ = dir.path() / "port";
  fs::path fallback_ = dir.path() / "fallback";
  int port_ = 0;
  std::string agent_scheme_ = "ws";
  bool library_tasks_ = false;
  std::string map_seconds_ = "4";  // how long each map of the shell job sleeps first
};

TEST_F(ShuffleJobDecommissionTest, SigpwrWithPeerMigrationNeedsNoMapRerun) {
  sigpwrWithPeerMigration(writeAgentConfig("peer"));
}

// The same job as library tasks (the example "words" job library on the agents' library
// runner): the maps' output blocks are migrated the same way, the reduces read them.
TEST_F(ShuffleJobDecommissionTest, SigpwrWithLibraryTasksNeedsNoMapRerun) {
  library_tasks_ = true;
  sigpwrWithPeerMigration(writeAgentConfig("peer"));
}

// The same with authentication on: the reduces' fetches and the peer migration's PUTs are
// signed (the PUTs by the host, for the plugin), and nothing shows the secret.
TEST_F(ShuffleJobDecommissionTest, PeerMigrationAndFetchesWorkWithAuthentication) {
  const std::string secret_text = "shuffle-test-cluster-secret-5c2a91";
  const fs::path secret = dir.path() / "cluster.secret";
  writeFile(secret, secret_text + "\n");
  fs::permissions(secret, fs::perms::owner_read | fs::perms::owner_write);
  auto [driver, a, b] = sigpwrWithPeerMigration(writeAgentConfig("peer", secret),
                                                {"--auth-secret-file", secret.string()});
  for (const ChildProcess* p : {a.get(), b.get()}) {
    EXPECT_NE(p->output().find("authenticated with driver"), std::string::npos) << p->output();
    EXPECT_EQ(p->output().find("refused"), std::string::npos) << p->output();
    EXPECT_EQ(p->output().find(secret_text), std::string::npos) << p->output();
  }
  EXPECT_EQ(driver->output().find(secret_text), std::string::npos) << driver->output();
}

// The same over TLS, with authentication too: agents on wss://, the reduces' input fetches and
// the peer plugin's PUTs over https:// (the agent hands the plugin its TLS settings), every
// certificate checked against the test's CA.
TEST_F(ShuffleJobDecommissionTest, PeerMigrationAndFetchesWorkOverTls) {
  if (!TestPki::available()) GTEST_SKIP() << "the openssl program is not installed";
  TestPki pki(dir.path() / "pki");
  const fs::path secret = dir.path() / "cluster.secret";
  writeFile(secret, "shuffle-test-cluster-secret-over-tls\n");
  fs::permissions(secret, fs::perms::owner_read | fs::perms::owner_write);
  const fs::path driver_config = dir.path() / "driver.json";
  writeFile(driver_config, "{\"tls\": " + pki.tlsJson("server") + "}\n");
  agent_scheme_ = "wss";
  auto [driver, a, b] = sigpwrWithPeerMigration(
      writeAgentConfig("peer", secret, pki.tlsJson("server")),
      {"--auth-secret-file", secret.string(), "--config", driver_config.string()});
  for (const ChildProcess* p : {a.get(), b.get()}) {
    EXPECT_NE(p->output().find("TLS on"), std::string::npos) << p->output();
    EXPECT_NE(p->output().find("authenticated with driver"), std::string::npos) << p->output();
    EXPECT_NE(p->output().find("(https)"), std::string::npos) << p->output();
    EXPECT_EQ(p->output().find("refusing"), std::string::npos) << p->output();
  }
}

TEST_F(ShuffleJobDecommissionTest, DriverDecommissionWithFallbackMigrationNeedsNoMapRerun) {
  const fs::path job = writeJob();
  const fs::path config = writeAgentConfig("fallback");
  auto driver = startJob(job);
  auto a = startAgent("agent-a", config);
  auto b = startAgent("agent-b", config);
  ASSERT_TRUE(waitUntil([&] { return allMapsStarted(); }, 30s)) << driver->output() << logs(*a, *b);

  ChildProcess command(
      {driverBinary(), "decommission", "agent-a", "--driver", "127.0.0.1:" + std::to_string(port_)},
      (dir.path() / "command.log").string());
  EXPECT_EQ(command.waitExit(15s), 0) << command.output();
  EXPECT_NE(command.output().find("agent-a is decommissioning"), std::string::npos)
      << command.output();

  EXPECT_EQ(a->waitExit(60s), 0) << logs(*a, *b);
  EXPECT_EQ(driver->waitExit(90s), 0) << driver->output() << logs(*a, *b);
  expectJobSucceededWithoutMapReruns(*driver, logs(*a, *b));
  std::size_t stored = 0;
  for (const auto& entry : fs::directory_iterator(fallback_)) {
    if (entry.path().filename().string().rfind("shuffle_0_", 0) == 0) ++stored;
  }
  EXPECT_GE(stored, static_cast<std::size_t>(kReducers))
      << "agent-a's map outputs are not in the fallback store" << logs(*a, *b);
}

TEST_F(ShuffleJobDecommissionTest, DecommissionOfAnUnknownExecutorIsRefused) {
  auto driver = startDriver({"serve"});
  ChildProcess command(
      {driverBinary(), "decommission", "nobody", "--driver", "127.0.0.1:" + std::to_string(port_)},
      (dir.path() / "command.log").string());
  EXPECT_EQ(command.waitExit(15s), 1) << command.output();
  EXPECT_NE(command.output().find("no executor 'nobody' is registered"), std::string::npos)
      << command.output();
}

// A block file deleted behind its agent's back (Spark's FetchFailed): the reduce that cannot
// fetch it reports which block, the driver takes the block as lost and reruns only the map
// that made it, and the job succeeds with the right sum.
TEST_F(ShuffleJobDecommissionTest, ABlockFileDeletedBehindTheAgentsBackRerunsOnlyItsMap) {
  map_seconds_ = "0";
  fs::path job = writeShellJob();
  // map-3 waits for the test's word, so that no reduce starts before the block is gone.
  const fs::path go = dir.path() / "go";
  std::string text = readFile(job);
  const std::string map3 = R"("name": "map-3", "shell": ")";
  const auto at = text.find(map3);
  ASSERT_NE(at, std::string::npos) << text;
  text.insert(at + map3.size(), "while [ ! -e '" + go.string() + "' ]; do sleep 0.05; done; ");
  writeFile(job, text);

  auto driver = startJob(job);
  auto a = startAgent("agent-a", writeAgentConfig("peer"));
  auto b = startAgent("agent-b", writeAgentConfig("peer"));
  fs::path victim;
  ASSERT_TRUE(waitUntil(
      [&] {
        for (const char* id : {"agent-a", "agent-b"}) {
          const fs::path file =
              dir.path() / (std::string("work-") + id) / "blocks" / "shuffle_0_0_0";
          if (fs::exists(file)) victim = file;
        }
        return !victim.empty();
      },
      30s))
      << driver->output() << logs(*a, *b);
  fs::remove(victim);
  writeFile(go, "");

  ASSERT_EQ(driver->waitExit(90s), 0) << driver->output() << logs(*a, *b);
  const std::string out = driver->output();
  EXPECT_NE(out.find("job shuffle SUCCEEDED"), std::string::npos) << out << logs(*a, *b);
  EXPECT_NE(out.find("sum=" + std::to_string(countWords(data_))), std::string::npos) << out;
  EXPECT_NE(out.find("1 map tasks rerun for lost blocks"), std::string::npos) << out;
  EXPECT_NE(out.find("0 retries"), std::string::npos) << "a fetch failure is no retry\n" << out;
  for (const auto& line : linesStartingWith(out, "map-")) {
    const bool rerun = line.rfind("map-0 ", 0) == 0;
    EXPECT_NE(line.find(rerun ? "attempts=2" : "attempts=1"), std::string::npos) << line;
  }
  EXPECT_NE(out.find("1 failed fetches"), std::string::npos) << out;
}

}  // namespace
}  // namespace dockhand::testing
