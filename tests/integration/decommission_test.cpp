// Integration tests of blocks and decommission: real agents (the `dockhand` program) on
// 127.0.0.1, scripted drivers, real block servers, real signals.
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <Poco/Net/HTTPClientSession.h>
#include <Poco/Net/HTTPRequest.h>
#include <Poco/Net/HTTPResponse.h>
#include <Poco/StreamCopier.h>
#include <Poco/URI.h>
#include <gtest/gtest.h>

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
using std::chrono_literals::operator""ms;
using std::chrono_literals::operator""s;

// The block files in an agent's block directory (the temporary area left out).
std::vector<std::string> storedBlocks(const fs::path& work_dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(work_dir / "blocks", ec)) {
    if (e.path().filename() != ".incoming") out.push_back(e.path().filename().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

class DecommissionTest : public ::testing::Test {
 protected:
  fs::path workDir(const std::string& id) { return dir.path() / ("work-" + id); }

  std::unique_ptr<ChildProcess> startAgent(const std::string& driver_url, const std::string& id,
                                           const proto::Json& config = proto::Json::object()) {
    fs::path config_file = dir.path() / (id + ".json");
    writeFile(config_file, config.dump());
    AgentCommand command{.config = config_file,
                         .driver_url = driver_url,
                         .executor_id = id,
                         .cores = 4,
                         .work_dir = workDir(id)};
    return std::make_unique<ChildProcess>(command.argv(), (dir.path() / (id + ".log")).string());
  }

  static proto::Envelope launch(std::uint64_t task_id, const std::string& shell) {
    proto::LaunchTask msg;
    msg.task.task_id = task_id;
    msg.task.name = "t" + std::to_string(task_id);
    msg.task.payload = {{"shell", shell}};
    return proto::makeMessage(msg);
  }

  // Every block the agent said it added, by id (the last word wins).
  static std::map<std::string, proto::BlockInfo> announced(const FakeDriver& driver) {
    std::map<std::string, proto::BlockInfo> out;
    for (const auto& frame : driver.history()) {
      if (frame.type != "UpdateBlockInfo") continue;
      for (auto& b : proto::decodeBody<proto::UpdateBlockInfo>(frame.body).added) out[b.id] = b;
    }
    return out;
  }
  static std::vector<std::string> removed(const FakeDriver& driver) {
    std::vector<std::string> out;
    for (const auto& frame : driver.history()) {
      if (frame.type != "UpdateBlockInfo") continue;
      for (auto& id : proto::decodeBody<proto::UpdateBlockInfo>(frame.body).removed) {
        out.push_back(id);
      }
    }
    std::sort(out.begin(), out.end());
    return out;
  }
  static std::size_t countOfType(const FakeDriver& driver, const std::string& type) {
    std::size_t n = 0;
    for (const auto& frame : driver.history()) n += frame.type == type;
    return n;
  }
  static std::string writeOutput(const std::string& id, int kib) {
    return "head -c " + std::to_string(kib * 1024) + " /dev/urandom > $DOCKHAND_OUTPUT_DIR/" + id;
  }

  TempDir dir;
};

TEST_F(DecommissionTest, OutputsBecomeBlocksAnnouncedBeforeTheTaskFinishes) {
  FakeDriver driver;
  auto agent = startAgent(driver.url(), "a1");
  ASSERT_TRUE(driver.waitForRegistration(10s)) << agent->output();
  ASSERT_FALSE(driver.agentBlockUrl().empty());
  driver.send(launch(
      1, writeOutput("shuffle_0_1_0", 300) + "; echo hi > $DOCKHAND_OUTPUT_DIR/task_1_note"));
  ASSERT_TRUE(driver.waitForStatus(1, proto::TaskState::kFinished)) << agent->output();
  auto history = driver.history();
  std::size_t info_at = history.size();
  std::size_t finished_at = history.size();
  for (std::size_t i = 0; i < history.size(); ++i) {
    if (history[i].type == "UpdateBlockInfo" && info_at == history.size()) info_at = i;
    if (history[i].type == "StatusUpdate" &&
        proto::decodeBody<proto::StatusUpdate>(history[i].body).state ==
            proto::TaskState::kFinished) {
      finished_at = i;
    }
  }
  ASSERT_LT(info_at, finished_at) << "UpdateBlockInfo must precede FINISHED";
  auto blocks = announced(driver);
  ASSERT_EQ(blocks.size(), 2u);
  const auto& block = blocks["shuffle_0_1_0"];
  EXPECT_EQ(block.size, 300u * 1024);
  EXPECT_EQ(block.executor_id, "a1");
  EXPECT_EQ(block.url, driver.agentBlockUrl() + "/blocks/shuffle_0_1_0");
  HttpReply got = httpGet(block.url);
  EXPECT_EQ(got.status, 200);
  EXPECT_EQ(got.body.size(), block.size);
  EXPECT_EQ(got.checksum, block.checksum);

  // A second task reads it as an input, fetched before it starts.
  proto::LaunchTask reader;
  reader.task.task_id = 2;
  reader.task.payload = {{"shell", "wc -c < $DOCKHAND_INPUT_DIR/shuffle_0_1_0"}};
  reader.task.inputs = {proto::InputBlock{
      .id = block.id, .url = block.url, .size = block.size, .checksum = block.checksum}};
  driver.send(proto::makeMessage(reader));
  auto done = driver.waitForStatus(2, proto::TaskState::kFinished);
  ASSERT_TRUE(done) << agent->output();
  EXPECT_EQ(done->result["stdout"], std::to_string(block.size) + "\n");

  // A bad input fails the task, naming the block and the URL; it never runs.
  reader.task.task_id = 3;
  reader.task.inputs[0].url = driver.agentBlockUrl() + "/blocks/rdd_9_9";
  reader.task.inputs[0].id = "rdd_9_9";
  driver.send(proto::makeMessage(reader));
  auto failed = driver.waitForStatus(3, proto::TaskState::kFailed);
  ASSERT_TRUE(failed) << agent->output();
  EXPECT_NE(failed->reason.find("rdd_9_9"), std::string::npos) << failed->reason;
  EXPECT_NE(failed->reason.find(reader.task.inputs[0].url), std::string::npos) << failed->reason;

  // An output that is not a block id fails the task with the reason.
  driver.send(launch(4, "echo x > $DOCKHAND_OUTPUT_DIR/bad-name"));
  auto bad = driver.waitForStatus(4, proto::TaskState::kFailed);
  ASSERT_TRUE(bad) << agent->output();
  EXPECT_NE(bad->reason.find("bad-name"), std::string::npos) << bad->reason;
}

TEST_F(DecommissionTest, SigpwrWaitsForTasksMigratesToAPeerAndExitsZero) {
  FakeDriver peer_driver;
  auto peer = startAgent(peer_driver.url(), "p1");
  ASSERT_TRUE(peer_driver.waitForRegistration(10s)) << peer->output();
  FakeDriver driver;
  auto agent = startAgent(driver.url(), "a1", {{"decommission", {{"check_interval_ms", 100}}}});
  ASSERT_TRUE(driver.waitForRegistration(10s)) << agent->output();
  driver.setPeers({{"p1", peer_driver.agentBlockUrl()}});

  driver.send(launch(1, writeOutput("rdd_1_0", 2048)));
  ASSERT_TRUE(driver.waitForStatus(1, proto::TaskState::kFinished)) << agent->output();
  auto marker = dir.path() / "slow-started";
  driver.send(
      launch(2, "touch " + marker.string() + "; sleep 2; " + writeOutput("shuffle_3_0_1", 1024)));
  ASSERT_TRUE(waitUntil([&] { return fs::exists(marker); }, 10s));

  agent->signal(SIGPWR);
  ASSERT_TRUE(driver.waitForType("ExecutorDecommissioning", 5s)) << agent->output();
  ASSERT_TRUE(waitUntil([&] { return countOfType(driver, "GetPeers") > 0; }, 5s));
  driver.send(launch(3, "true"));
  auto lost = driver.waitForStatus(3, proto::TaskState::kLost);
  ASSERT_TRUE(lost) << agent->output();
  EXPECT_EQ(lost->reason, "executor a1 is decommissioning");
  EXPECT_TRUE(agent->running()) << "it must wait for task 2";

  ASSERT_TRUE(driver.waitForStatus(2, proto::TaskState::kFinished)) << agent->output();
  auto code = agent->waitExit(20s);
  ASSERT_TRUE(code) << agent->output();
  EXPECT_EQ(*code, 0) << agent->output();
  auto remove = driver.waitForType("RemoveExecutor", 1s);
  ASSERT_TRUE(remove);
  EXPECT_EQ(proto::decodeBody<proto::RemoveExecutor>(remove->body).reason, "decommission finished");

  auto blocks = announced(driver);
  EXPECT_EQ(removed(driver), (std::vector<std::string>{"rdd_1_0", "shuffle_3_0_1"}));
  for (const char* id : {"rdd_1_0", "shuffle_3_0_1"}) {
    const auto& b = blocks[id];
    EXPECT_EQ(b.executor_id, "p1") << id;
    EXPECT_EQ(b.url, peer_driver.agentBlockUrl() + "/blocks/" + id);
    HttpReply got = httpGet(b.url);
    EXPECT_EQ(got.status, 200) << id;
    EXPECT_EQ(got.body.size(), b.size) << id;
    EXPECT_EQ(got.checksum, b.checksum) << id;
  }
  EXPECT_TRUE(storedBlocks(workDir("a1")).empty());
}

TEST_F(DecommissionTest, FallbackPluginCopiesToTheFallbackDirectory) {
  fs::path fallback = dir.path() / "fallback";
  FakeDriver driver;
  auto agent = startAgent(
      driver.url(), "a1",
      {{"fallback_dir", fallback.string()},
       {"decommission", {{"check_interval_ms", 100}, {"migration", {"peer", "fallback"}}}}});
  ASSERT_TRUE(driver.waitForRegistration(10s)) << agent->output();
  driver.send(launch(1, writeOutput("task_1_data", 512)));
  ASSERT_TRUE(driver.waitForStatus(1, proto::TaskState::kFinished)) << agent->output();
  std::string checksum = announced(driver)["task_1_data"].checksum;
  driver.send(
      proto::makeMessage(proto::DecommissionExecutor{.reason = "test"}));  // no peers: fallback
  auto code = agent->waitExit(20s);
  ASSERT_TRUE(code) << agent->output();
  EXPECT_EQ(*code, 0) << agent->output();
  auto blocks = announced(driver);
  EXPECT_EQ(blocks["task_1_data"].executor_id, "");
  EXPECT_EQ(blocks["task_1_data"].url, "fallback:task_1_data");
  ASSERT_TRUE(fs::exists(fallback / "task_1_data"));
  EXPECT_EQ(fs::file_size(fallback / "task_1_data"), 512u * 1024);
  EXPECT_TRUE(storedBlocks(workDir("a1")).empty());

  // Another agent with the same fallback_dir serves it.
  FakeDriver other_driver;
  auto other = startAgent(other_driver.url(), "a2", {{"fallback_dir", fallback.string()}});
  ASSERT_TRUE(other_driver.waitForRegistration(10s)) << other->output();
  HttpReply got = httpGet(other_driver.agentBlockUrl() + "/blocks/task_1_data");
  EXPECT_EQ(got.status, 200);
  EXPECT_EQ(got.body.size(), 512u * 1024);
  (void)checksum;
}

TEST_F(DecommissionTest, AMigrationPluginTakesItsOwnConfigFromItsEntry) {
  // No fallback_dir: the store is the fallback plugin's own config, in decommission.migration.
  fs::path store = dir.path() / "store";
  const proto::Json entry = {{"name", "fallback"}, {"config", {{"dir", store.string()}}}};
  FakeDriver driver;
  auto agent = startAgent(
      driver.url(), "a1",
      {{"decommission",
        {{"check_interval_ms", 100}, {"migration", proto::Json::array({"peer", entry})}}}});
  ASSERT_TRUE(driver.waitForRegistration(10s)) << agent->output();
  driver.send(launch(1, writeOutput("task_1_data", 64)));
  ASSERT_TRUE(driver.waitForStatus(1, proto::TaskState::kFinished)) << agent->output();
  driver.send(
      proto::makeMessage(proto::DecommissionExecutor{.reason = "test"}));  // no peers: the store
  auto code = agent->waitExit(20s);
  ASSERT_TRUE(code) << agent->output();
  EXPECT_EQ(*code, 0) << agent->output();
  ASSERT_TRUE(fs::exists(store / "task_1_data")) << agent->output();
  EXPECT_EQ(fs::file_size(store / "task_1_data"), 64u * 1024);
  EXPECT_EQ(announced(driver)["task_1_data"].url, "fallback:task_1_data");
  EXPECT_TRUE(storedBlocks(workDir("a1")).empty());
}

TEST_F(DecommissionTest, AMigrationConfigItsSchemaRefusesStopsTheAgentWithThePath) {
  const proto::Json entry = {{"name", "fallback"}, {"config", {{"dir", 5}}}};
  FakeDriver driver;
  auto agent = startAgent(driver.url(), "a1",
                          {{"decommission", {{"migration", proto::Json::array({entry})}}}});
  auto code = agent->waitExit(20s);
  ASSERT_TRUE(code) << agent->output();
  EXPECT_EQ(*code, 8) << agent->output();  // a required plugin failed to start
  EXPECT_TRUE(contains(agent->output(), "/dir")) << agent->output();
}

TEST_F(DecommissionTest, DisabledDecommissionOnlyWarns) {
  FakeDriver driver;
  auto agent = startAgent(driver.url(), "a1", {{"decommission", {{"enabled", false}}}});
  ASSERT_TRUE(driver.waitForRegistration(10s)) << agent->output();
  agent->signal(SIGPWR);
  EXPECT_TRUE(waitUntil(
      [&] { return agent->output().find("decommission is disabled") != std::string::npos; }, 5s))
      << agent->output();
  EXPECT_FALSE(driver.waitForType("ExecutorDecommissioning", 500ms));
  EXPECT_TRUE(agent->running());
  driver.send(launch(1, "true"));
  EXPECT_TRUE(driver.waitForStatus(1, proto::TaskState::kFinished)) << agent->output();
}

TEST_F(DecommissionTest, SecondSignalIsIgnored) {
  FakeDriver driver;
  auto agent = startAgent(driver.url(), "a1", {{"decommission", {{"check_interval_ms", 100}}}});
  ASSERT_TRUE(driver.waitForRegistration(10s)) << agent->output();
  auto marker = dir.path() / "started";
  driver.send(launch(1, "touch " + marker.string() + "; sleep 2"));
  ASSERT_TRUE(waitUntil([&] { return fs::exists(marker); }, 10s));
  agent->signal(SIGPWR);
  ASSERT_TRUE(driver.waitForType("ExecutorDecommissioning", 5s)) << agent->output();
  agent->signal(SIGPWR);
  EXPECT_TRUE(waitUntil(
      [&] { return agent->output().find("already started decommissioning") != std::string::npos; },
      5s))
      << agent->output();
  auto code = agent->waitExit(20s);
  ASSERT_TRUE(code) << agent->output();
  EXPECT_EQ(*code, 0);
  EXPECT_EQ(countOfType(driver, "ExecutorDecommissioning"), 1u);
}

TEST_F(DecommissionTest, DeadlineExpiresWithBlocksLeftExitsTen) {
  FakeDriver driver;  // answers GetPeers with no peers: nothing can move
  auto agent = startAgent(driver.url(), "a1",
                          {{"decommission", {{"check_interval_ms", 100}, {"deadline_ms", 1500}}}});
  ASSERT_TRUE(driver.waitForRegistration(10s)) << agent->output();
  driver.send(launch(1, writeOutput("rdd_4_4", 64)));
  ASSERT_TRUE(driver.waitForStatus(1, proto::TaskState::kFinished)) << agent->output();
  agent->signal(SIGPWR);
  auto code = agent->waitExit(15s);
  ASSERT_TRUE(code) << agent->output();
  EXPECT_EQ(*code, toInt(ExitCode::kDecommissionIncomplete)) << agent->output();
  EXPECT_NE(agent->output().find("rdd_4_4"), std::string::npos);
  auto remove = driver.waitForType("RemoveExecutor", 1s);
  ASSERT_TRUE(remove);
  EXPECT_NE(proto::decodeBody<proto::RemoveExecutor>(remove->body).reason.find("deadline"),
            std::string::npos);
  EXPECT_EQ(storedBlocks(workDir("a1")), std::vector<std::string>{"rdd_4_4"})
      << "a block that was not moved is kept";
}

TEST_F(DecommissionTest, HeartbeatsShowBlocksMovingWhileAPassRuns) {
  FakeDriver peer_driver;
  auto peer = startAgent(peer_driver.url(), "p1");
  ASSERT_TRUE(peer_driver.waitForRegistration(10s)) << peer->output();
  FakeDriver driver;  // heartbeats every 200 ms
  // One block at a time at 2 MiB/s: four 1 MiB blocks take about 2 s, one pass.
  auto agent = startAgent(
      driver.url(), "a1",
      {{"decommission",
        {{"check_interval_ms", 100}, {"max_concurrent", 1}, {"bandwidth_bytes_per_s", 2 << 20}}}});
  ASSERT_TRUE(driver.waitForRegistration(10s)) << agent->output();
  driver.setPeers({{"p1", peer_driver.agentBlockUrl()}});
  std::string make;
  for (int i = 0; i < 4; ++i)
    make += writeOutput("shuffle_5_" + std::to_string(i) + "_0", 1024) + ";";
  driver.send(launch(1, make));
  ASSERT_TRUE(driver.waitForStatus(1, proto::TaskState::kFinished)) << agent->output();

  agent->signal(SIGPWR);
  auto midway = driver.waitFor(
      [](const proto::Envelope& e) {
        if (e.type != "Heartbeat") return false;
        auto d = proto::decodeBody<proto::Heartbeat>(e.body).decommission;
        return d.is_object() && d.value("blocks_migrated", 0) >= 1 &&
               d.value("blocks_left", 0) >= 1;
      },
      20s);
  ASSERT_TRUE(midway) << "no heartbeat showed a pass part-way\n" << agent->output();
  auto d = proto::decodeBody<proto::Heartbeat>(midway->body).decommission;
  EXPECT_EQ(d["state"], "migrating");
  EXPECT_EQ(d["blocks_total"], 4);
  EXPECT_EQ(d["bytes_total"], 4 << 20);
  EXPECT_EQ(d["passes"], 1) << "block by block within the first pass, not pass by pass";
  EXPECT_EQ(d.value("blocks_migrated", 0) + d.value("blocks_left", 0), 4);
  // With bytes moved, the agent says at what rate and how long the rest takes at it.
  ASSERT_TRUE(d["bytes_per_s"].is_number_unsigned()) << d;
  EXPECT_GT(d["bytes_per_s"].get<std::uint64_t>(), 0u) << d;
  ASSERT_TRUE(d["eta_ms"].is_number_unsigned()) << d;
  EXPECT_GT(d["eta_ms"].get<std::uint64_t>(), 0u) << d;
  auto code = agent->waitExit(20s);
  ASSERT_TRUE(code) << agent->output();
  EXPECT_EQ(*code, 0) << agent->output();
}

TEST_F(DecommissionTest, PeerWithAFullDiskRefusesAndTheBlockStaysAtHome) {
  // The peer's work directory is a 4 MiB disk: a 1 MiB block fits, a 6 MiB one does not.
  TmpfsMount disk(workDir("p1"), 4 << 20);
  if (!disk.mounted()) GTEST_SKIP() << disk.error();
  FakeDriver peer_driver;
  auto peer = startAgent(peer_driver.url(), "p1");
  ASSERT_TRUE(peer_driver.waitForRegistration(10s)) << peer->output();
  FakeDriver driver;
  auto agent = startAgent(
      driver.url(), "a1",
      {{"decommission",
        {{"check_interval_ms", 100}, {"deadline_ms", 3000}, {"max_failures_per_block", 2}}}});
  ASSERT_TRUE(driver.waitForRegistration(10s)) << agent->output();
  driver.setPeers({{"p1", peer_driver.agentBlockUrl()}});
  driver.send(launch(1, writeOutput("rdd_1_0", 1024) + "; " + writeOutput("shuffle_2_0_0", 6144)));
  ASSERT_TRUE(driver.waitForStatus(1, proto::TaskState::kFinished)) << agent->output();
  auto blocks = announced(driver);

  agent->signal(SIGPWR);
  auto code = agent->waitExit(20s);
  ASSERT_TRUE(code) << agent->output();
  EXPECT_EQ(*code, toInt(ExitCode::kDecommissionIncomplete)) << agent->output();
  EXPECT_NE(agent->output().find("HTTP 507"), std::string::npos) << agent->output();
  EXPECT_NE(agent->output().find("not enough disk space for block shuffle_2_0_0"),
            std::string::npos)
      << agent->output();
  EXPECT_EQ(storedBlocks(workDir("a1")), std::vector<std::string>{"shuffle_2_0_0"})
      << "the block that did not fit stays at home";
  EXPECT_EQ(removed(driver), std::vector<std::string>{"rdd_1_0"});
  EXPECT_EQ(storedBlocks(workDir("p1")), std::vector<std::string>{"rdd_1_0"});
  EXPECT_TRUE(fs::is_empty(workDir("p1") / "blocks" / ".incoming")) << "nothing half-written";
  HttpReply moved = httpGet(peer_driver.agentBlockUrl() + "/blocks/rdd_1_0");
  EXPECT_EQ(moved.status, 200);
  EXPECT_EQ(moved.checksum, blocks["rdd_1_0"].checksum);
}

TEST_F(DecommissionTest, PeerDyingMidMigrationLosesNothing) {
  FakeDriver d1;
  FakeDriver d2;
  auto dying = startAgent(d1.url(), "p1");
  auto healthy = startAgent(d2.url(), "p2");
  ASSERT_TRUE(d1.waitForRegistration(10s)) << dying->output();
  ASSERT_TRUE(d2.waitForRegistration(10s)) << healthy->output();
  FakeDriver driver;
  // Slow enough (8 MiB/s for 24 MiB) to kill the first peer mid-block.
  auto agent = startAgent(
      driver.url(), "a1",
      {{"decommission",
        {{"check_interval_ms", 100}, {"max_concurrent", 1}, {"bandwidth_bytes_per_s", 8 << 20}}}});
  ASSERT_TRUE(driver.waitForRegistration(10s)) << agent->output();
  driver.setPeers({{"p1", d1.agentBlockUrl()}, {"p2", d2.agentBlockUrl()}});
  driver.send(launch(1, writeOutput("shuffle_7_0_0", 24 * 1024)));
  ASSERT_TRUE(driver.waitForStatus(1, proto::TaskState::kFinished)) << agent->output();
  std::string checksum = announced(driver)["shuffle_7_0_0"].checksum;

  agent->signal(SIGPWR);
  auto incoming = workDir("p1") / "blocks" / ".incoming";
  ASSERT_TRUE(waitUntil([&] { return fs::exists(incoming) && !fs::is_empty(incoming); }, 10s))
      << agent->output();
  dying->signal(SIGKILL);
  ASSERT_TRUE(dying->waitExit(5s));

  auto code = agent->waitExit(30s);
  ASSERT_TRUE(code) << agent->output();
  EXPECT_EQ(*code, 0) << agent->output();
  auto block = announced(driver)["shuffle_7_0_0"];
  EXPECT_EQ(block.executor_id, "p2");
  HttpReply got = httpGet(block.url);
  EXPECT_EQ(got.status, 200);
  EXPECT_EQ(got.checksum, checksum);
  EXPECT_EQ(got.body.size(), 24u << 20);
  EXPECT_TRUE(storedBlocks(workDir("p1")).empty()) << "the dead peer shows no half block";
}

TEST_F(DecommissionTest, AgentKilledMidWriteNeverServesAPartialBlock) {
  FakeDriver driver;
  auto agent = startAgent(driver.url(), "a1");
  ASSERT_TRUE(driver.waitForRegistration(10s)) << agent->output();
  Poco::URI uri(driver.agentBlockUrl());
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(uri.getPort());
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  std::string head =
      "PUT /blocks/rdd_8_8 HTTP/1.1\r\nHost: x\r\nContent-Length: 10485760\r\n"
      "X-Dockhand-Checksum: xxh64:0123456789abcdef\r\n\r\n";
  std::string half(4 << 20, 'h');
  ASSERT_EQ(::send(fd, head.data(), head.size(), MSG_NOSIGNAL), static_cast<ssize_t>(head.size()));
  ASSERT_EQ(::send(fd, half.data(), half.size(), MSG_NOSIGNAL), static_cast<ssize_t>(half.size()));
  auto incoming = workDir("a1") / "blocks" / ".incoming";
  ASSERT_TRUE(waitUntil([&] { return !fs::is_empty(incoming); }, 5s));
  EXPECT_EQ(httpGet(driver.agentBlockUrl() + "/blocks/rdd_8_8").status, 404);
  agent->signal(SIGKILL);
  ASSERT_TRUE(agent->waitExit(5s));
  ::close(fd);
  EXPECT_TRUE(storedBlocks(workDir("a1")).empty());

  FakeDriver again;
  auto restarted = startAgent(again.url(), "a1");
  ASSERT_TRUE(again.waitForRegistration(10s)) << restarted->output();
  EXPECT_EQ(httpGet(again.agentBlockUrl() + "/blocks/rdd_8_8").status, 404);
  EXPECT_TRUE(fs::is_empty(incoming)) << "the half-written file is cleaned up";
}

}  // namespace
}  // namespace dockhand::testing

namespace dockhand::testing {
namespace {

// GET /readyz: not ready before the agent registered, ready once it runs, not ready again as
// soon as a decommission starts (while a task still runs there), so that a load balancer or a
// Kubernetes probe stops sending it work; /healthz stays "ok" throughout.
TEST_F(DecommissionTest, ReadyzTurnsNotReadyWhenDecommissionStarts) {
  FakeDriver driver;
  const int block_port = unusedPort();
  auto agent =
      startAgent(driver.url(), "r1",
                 {{"block_port", block_port}, {"decommission", {{"check_interval_ms", 100}}}});
  const std::string url = "http://127.0.0.1:" + std::to_string(block_port);
  ASSERT_TRUE(driver.waitForRegistration(10s)) << agent->output();
  // Registered: ready as soon as the agent's status (refreshed every 250 ms) shows it.
  EXPECT_TRUE(waitUntil([&] { return httpGet(url + "/readyz").status == 200; }, 5s))
      << agent->output();
  EXPECT_EQ(httpGet(url + "/readyz").body, "ready\n");
  auto marker = dir.path() / "started";
  driver.send(launch(1, "touch " + marker.string() + "; sleep 3"));
  ASSERT_TRUE(waitUntil([&] { return fs::exists(marker); }, 10s));
  driver.send(proto::makeMessage(proto::DecommissionExecutor{.reason = "test"}));
  HttpReply ready;
  EXPECT_TRUE(waitUntil(
      [&] {
        ready = httpGet(url + "/readyz");
        return ready.status == 503;
      },
      5s))
      << agent->output();
  EXPECT_EQ(ready.body, "not ready: decommissioning\n");
  EXPECT_EQ(httpGet(url + "/healthz").status, 200);
  EXPECT_EQ(agent->waitExit(30s), 0) << agent->output();
}

}  // namespace
}  // namespace dockhand::testing
