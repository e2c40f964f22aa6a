// PluginDecommissioner over the real migration plugins (dockhand-peer.so, dockhand-fallback.so
// loaded by the real loader) and a real block store: which blocks a pass offers, the order of
// the plugins, what it reports on the way, and what it deletes.
#include "decommission/plugin_decommissioner.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <Poco/Net/HTTPRequestHandler.h>
#include <Poco/Net/HTTPRequestHandlerFactory.h>
#include <Poco/Net/HTTPServer.h>
#include <Poco/Net/HTTPServerParams.h>
#include <Poco/Net/HTTPServerRequest.h>
#include <Poco/Net/HTTPServerResponse.h>
#include <Poco/Net/ServerSocket.h>
#include <Poco/StreamCopier.h>
#include <gtest/gtest.h>

#include "fixture_common.h"
#include "plugins/plugin_host.h"

namespace dockhand::agent {
namespace {

namespace fs = std::filesystem;

// Keeps what a pass posts; the test runs it when it wants to look.
class RecordingSink : public EventSink {
 public:
  void post(std::function<void()> event) override {
    std::lock_guard lock(mutex_);
    events_.push_back(std::move(event));
  }
  void runAll() {
    std::vector<std::function<void()>> now;
    {
      std::lock_guard lock(mutex_);
      now.swap(events_);
    }
    for (auto& e : now) e();
  }

 private:
  std::mutex mutex_;
  std::vector<std::function<void()>> events_;
};

// A port on 127.0.0.1 that refuses connections: bound, never listening.
class ClosedPort {
 public:
  ClosedPort() {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      ADD_FAILURE() << "bind: " << std::strerror(errno);
    }
    socklen_t len = sizeof addr;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
  }
  ~ClosedPort() { ::close(fd_); }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

 private:
  int fd_ = -1;
  int port_ = 0;
};

// A peer's block server as far as a PUT goes: on 127.0.0.1, it reads each PUT's body whole and
// answers every one with the same status and text, counting the PUTs per block.
class FakePeer {
 public:
  FakePeer(int status, std::string text) : status_(status), text_(std::move(text)) {
    Poco::Net::ServerSocket socket(Poco::Net::SocketAddress("127.0.0.1", 0));
    port_ = socket.address().port();
    server_ = std::make_unique<Poco::Net::HTTPServer>(new Handlers(this), socket,
                                                      new Poco::Net::HTTPServerParams);
    server_->start();
  }
  ~FakePeer() { server_->stopAll(true); }
  FakePeer(const FakePeer&) = delete;
  FakePeer& operator=(const FakePeer&) = delete;

  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  // PUTs received for each block id.
  std::map<std::string, int> puts() const {
    std::lock_guard lock(mutex_);
    return puts_;
  }
  int totalPuts() const {
    int total = 0;
    for (const auto& [id, n] : puts()) total += n;
    return total;
  }

 private:
  struct Handler final : Poco::Net::HTTPRequestHandler {
    explicit Handler(FakePeer* owner) : peer(owner) {}
    void handleRequest(Poco::Net::HTTPServerRequest& request,
                       Poco::Net::HTTPServerResponse& response) override {
      std::ostringstream body;
      Poco::StreamCopier::copyStream(request.stream(), body);
      const std::string uri = request.getURI();
      {
        std::lock_guard lock(peer->mutex_);
        if (request.getMethod() == "PUT") ++peer->puts_[uri.substr(uri.rfind('/') + 1)];
      }
      response.setStatusAndReason(static_cast<Poco::Net::HTTPResponse::HTTPStatus>(peer->status_));
      response.setContentLength(static_cast<std::streamsize>(peer->text_.size()));
      response.send() << peer->text_;
    }
    FakePeer* peer;
  };
  struct Handlers final : Poco::Net::HTTPRequestHandlerFactory {
    explicit Handlers(FakePeer* owner) : peer(owner) {}
    Poco::Net::HTTPRequestHandler* createRequestHandler(
        const Poco::Net::HTTPServerRequest&) override {
      return new Handler(peer);
    }
    FakePeer* peer;
  };

  int status_;
  std::string text_;
  int port_ = 0;
  std::unique_ptr<Poco::Net::HTTPServer> server_;
  mutable std::mutex mutex_;
  std::map<std::string, int> puts_;
};

// What the real block server answers a PUT while its agent decommissions.
constexpr const char* kDecommissioningText =
    "this agent is decommissioning and takes no new blocks; push it to another peer";

// Where the in-process plugin below says each block went: these fields, with "id" added and
// the block's id appended to "url" (a test sets it; by default an agent never offered).
nlohmann::json gPlace = {{"executor_id", "exec-elsewhere"}};

// A migration plugin written here (in process): it answers every block it is asked for as
// migrated to gPlace, without moving anything.
dh_status migrateElsewhere(dh_plugin*, const char* request_json, const char** out) {
  static std::string answer;
  nlohmann::json migrated = nlohmann::json::array();
  const nlohmann::json request = nlohmann::json::parse(request_json);
  for (const auto& block : request["blocks"]) {
    nlohmann::json item = gPlace;
    const std::string id = block["id"].get<std::string>();
    item["id"] = id;
    item["location"] = "http://elsewhere:7337/blocks/" + id;
    if (item.contains("url")) item["url"] = item["url"].get<std::string>() + "/" + id;
    migrated.push_back(std::move(item));
  }
  answer = nlohmann::json{{"migrated", migrated}, {"failed", nlohmann::json::array()}}.dump();
  *out = answer.c_str();
  return DH_OK;
}
dh_block_migration_vtable gElsewhere{sizeof(dh_block_migration_vtable), &migrateElsewhere, nullptr};

class PluginDecommissionerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    elsewhere_ = fixture::runnerDescriptor("elsewhere");
    elsewhere_.kinds = DH_KIND_BLOCK_MIGRATION;
    elsewhere_.task_runner = nullptr;
    elsewhere_.block_migration = &gElsewhere;
    host.add(PluginLibrary::fromDescriptor(&elsewhere_));
    char tmpl[] = "/tmp/dockhand-decommissioner-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root = tmpl;
    fs::create_directories(root / "fallback");
    store = std::make_unique<BlockStore>(root / "blocks");
    for (const char* id : {"rdd_1_0", "shuffle_2_0_0", "task_3_result"}) addBlock(id, 1000);
  }
  void TearDown() override {
    gPlace = {{"executor_id", "exec-elsewhere"}};
    decommissioner.reset();
    store.reset();
    fs::remove_all(root);
  }

  void addBlock(const std::string& id, std::size_t size) {
    auto writer = store->create(id);
    std::string data(size, static_cast<char>('a' + id.size() % 26));
    writer->write(data.data(), data.size());
    writer->commit();
  }

  std::unique_ptr<BlockMigrationPlugin> plugin(const std::string& name,
                                               MigrationProgressCallback progress) {
    nlohmann::json config = {{"max_concurrent", 2}};
    if (name == "peer") {
      config["max_failures_per_block"] = peer_max_failures;
      config["timeout_ms"] = 2000;
    }
    if (name == "fallback") config["dir"] = (root / "fallback").string();
    return host.createBlockMigration(name, config.dump(), std::move(progress));
  }

  void make(std::vector<std::string> names, MigrationKinds kinds = {},
            std::function<std::size_t()> writes_in_flight = {}, ReadableCheck readable = {}) {
    decommissioner.reset();
    decommissioner = std::make_unique<PluginDecommissioner>(
        sink, *store,
        [&](const MigrationProgressCallback& progress) {
          report_progress = progress;
          std::vector<std::unique_ptr<BlockMigrationPlugin>> plugins;
          plugins.reserve(names.size());
          for (const auto& n : names) plugins.push_back(plugin(n, progress));
          return plugins;
        },
        kinds, nullptr, std::move(writes_in_flight), std::move(readable));
    progress_seen.clear();
  }

  // Runs a pass on this thread the way the pass thread does, with reports recorded.
  MigrationPassResult pass(const std::vector<protocol::Peer>& peers) {
    std::promise<MigrationPassResult> done;
    decommissioner->startPass(
        peers, [this](MigrationPassProgress p) { progress_seen.push_back(p); },
        [&done](MigrationPassResult r) { done.set_value(std::move(r)); });
    auto result = done.get_future();
    // The result is posted: run the sink until it has come.
    for (int i = 0;
         i < 3000 && result.wait_for(std::chrono::milliseconds(0)) != std::future_status::ready;
         ++i) {
      sink.runAll();
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    sink.runAll();
    EXPECT_EQ(result.wait_for(std::chrono::seconds(0)), std::future_status::ready)
        << "the pass did not end within 15 s";
    return result.get();
  }

  int peer_max_failures = 1;
  dh_plugin_descriptor elsewhere_{};
  fs::path root;
  RecordingSink sink;
  PluginHost host{{DOCKHAND_PLUGIN_DIR}};
  std::unique_ptr<BlockStore> store;
  std::unique_ptr<PluginDecommissioner> decommissioner;
  // The callback the decommissioner gave its plugins: reports sent through it reach it.
  MigrationProgressCallback report_progress;
  std::vector<MigrationPassProgress> progress_seen;
};

TEST_F(PluginDecommissionerTest, WhatPeersCannotTakeGoesToTheFallbackAndProgressCountsEachBlock) {
  make({"peer", "fallback"});
  ClosedPort nobody;
  MigrationPassResult result = pass({{"exec-9", nobody.url()}});
  EXPECT_TRUE(result.complete);
  EXPECT_TRUE(result.failed.empty());
  ASSERT_EQ(result.moved.size(), 3u);
  EXPECT_EQ(result.bytes_moved, 3000u);
  for (const auto& info : result.moved) {
    EXPECT_EQ(info.executor_id, "") << info.id;
    EXPECT_EQ(info.url, "fallback:" + info.id);
    EXPECT_EQ(info.checksum, store->find(info.id)->checksum);
    EXPECT_EQ(fs::file_size(root / "fallback" / info.id), 1000u) << info.id;
  }
  EXPECT_EQ(result.blocks_left, 0u);
  // The first report says what the pass set out to move; then one per block, in any order.
  ASSERT_EQ(progress_seen.size(), 4u);
  EXPECT_EQ(progress_seen.front().blocks_total, 3u);
  EXPECT_EQ(progress_seen.front().bytes_total, 3000u);
  EXPECT_EQ(progress_seen.front().blocks_moved, 0u);
  for (std::size_t i = 1; i < progress_seen.size(); ++i) {
    EXPECT_EQ(progress_seen[i].blocks_moved, i);
    EXPECT_EQ(progress_seen[i].bytes_moved, i * 1000);
  }
  // Local copies stay until release() (after the driver has been told).
  EXPECT_EQ(store->count(), 3u);
  decommissioner->release({"rdd_1_0", "shuffle_2_0_0", "task_3_result"});
  EXPECT_EQ(store->count(), 0u);
  EXPECT_TRUE(decommissioner->blocksLeft().empty());
}

TEST_F(PluginDecommissionerTest, NothingMovesWithoutPeersAndEveryBlockSaysWhy) {
  make({"peer"});
  MigrationPassResult result = pass({});
  EXPECT_FALSE(result.complete);
  EXPECT_TRUE(result.moved.empty());
  ASSERT_EQ(result.failed.size(), 3u);
  for (const auto& [id, why] : result.failed) EXPECT_EQ(why, "peer: no peers") << id;
  EXPECT_EQ(result.blocks_left, 3u);
  EXPECT_EQ(result.bytes_left, 3000u);
  EXPECT_EQ(store->count(), 3u) << "nothing is deleted";
  ASSERT_FALSE(progress_seen.empty());
  EXPECT_EQ(progress_seen.back().blocks_moved, 0u);
}

// SPARK-44126: a peer that refuses because it decommissions itself does not cost the block
// one of its tries; the block goes to another peer in the same pass, and the busy peer is
// offered nothing more. With one try per block, every block must still reach the good peer.
TEST_F(PluginDecommissionerTest, DecommissioningPeerDoesNotCostTheBlockATry) {
  FakePeer busy(503, kDecommissioningText);
  FakePeer good(201, R"({"ok": true})");
  make({"peer"});
  MigrationPassResult result = pass({{"exec-busy", busy.url()}, {"exec-good", good.url()}});
  EXPECT_TRUE(result.complete);
  for (const auto& [id, why] : result.failed) ADD_FAILURE() << id << " not moved: " << why;
  ASSERT_EQ(result.moved.size(), 3u);
  for (const auto& info : result.moved) {
    EXPECT_EQ(info.executor_id, "exec-good") << info.id;
    EXPECT_EQ(info.url, good.url() + "/blocks/" + info.id);
  }
  EXPECT_EQ(good.totalPuts(), 3);
  // Once it said it decommissions, no further block goes to it (2 blocks move at once, so at
  // most 2 were on their way to it by then).
  EXPECT_LE(busy.totalPuts(), 2);
}

// A block that fails at a peer is not sent to that peer again in the same pass
// (docs/blocks.md), however many tries max_failures_per_block allows.
TEST_F(PluginDecommissionerTest, FailedPeerIsNotRetriedForTheSameBlockInAPass) {
  FakePeer full(507, "not enough disk space");
  peer_max_failures = 3;
  make({"peer"});
  MigrationPassResult result = pass({{"exec-full", full.url()}});
  EXPECT_FALSE(result.complete);
  EXPECT_TRUE(result.moved.empty());
  ASSERT_EQ(result.failed.size(), 3u);
  for (const auto& [id, why] : result.failed) {
    EXPECT_NE(why.find("HTTP 507"), std::string::npos) << id << ": " << why;
  }
  for (const auto& [id, n] : full.puts()) EXPECT_EQ(n, 1) << id;
  EXPECT_EQ(full.puts().size(), 3u);
}

// Only decommissioning peers: nothing moves, each block says why, and no peer is asked twice
// for one block.
TEST_F(PluginDecommissionerTest, WhenEveryPeerDecommissionsTheBlocksAreLeftWithTheReason) {
  FakePeer busy(503, kDecommissioningText);
  make({"peer"});
  MigrationPassResult result = pass({{"exec-busy", busy.url()}});
  EXPECT_FALSE(result.complete);
  ASSERT_EQ(result.failed.size(), 3u);
  for (const auto& [id, why] : result.failed) {
    EXPECT_NE(why.find("decommissioning"), std::string::npos) << id << ": " << why;
  }
  for (const auto& [id, n] : busy.puts()) EXPECT_EQ(n, 1) << id;
  EXPECT_EQ(store->count(), 3u) << "nothing is deleted";
}

// A peer's PUT let in just before this agent stopped taking blocks lands while a pass runs:
// the pass moved all it set out to move, but it is not the last one.
TEST_F(PluginDecommissionerTest, ABlockThatLandsDuringAPassNeedsAnotherPass) {
  int asked = 0;
  make({"fallback"}, {}, [&]() -> std::size_t {
    // The write ends just as the pass asks (asked before it counts what is left).
    if (asked++ == 0) addBlock("rdd_7_0", 500);
    return 0;
  });
  MigrationPassResult first = pass({});
  EXPECT_EQ(first.moved.size(), 3u);
  EXPECT_EQ(first.blocks_left, 1u);
  EXPECT_FALSE(first.complete) << "rdd_7_0 arrived during the pass and is still here";
  decommissioner->release({"rdd_1_0", "shuffle_2_0_0", "task_3_result"});
  MigrationPassResult second = pass({});
  ASSERT_EQ(second.moved.size(), 1u);
  EXPECT_EQ(second.moved[0].id, "rdd_7_0");
  EXPECT_TRUE(second.complete);
}

TEST_F(PluginDecommissionerTest, APassThatEndsWhileAWriteIsStillComingProvesNothing) {
  std::size_t in_flight = 1;
  make({"fallback"}, {}, [&] { return in_flight; });
  MigrationPassResult first = pass({});
  EXPECT_EQ(first.moved.size(), 3u);
  EXPECT_EQ(first.blocks_left, 0u);
  EXPECT_FALSE(first.complete) << "a PUT let in before the refusals began has not ended";
  decommissioner->release({"rdd_1_0", "shuffle_2_0_0", "task_3_result"});
  in_flight = 0;
  EXPECT_TRUE(pass({}).complete);
}

TEST_F(PluginDecommissionerTest, OnlyTheConfiguredKindsMigrate) {
  MigrationKinds shuffle_only;
  shuffle_only.rdd = false;
  shuffle_only.task = false;
  make({"fallback"}, shuffle_only);
  EXPECT_EQ(decommissioner->blocksLeft(), std::vector<std::string>{"shuffle_2_0_0"});
  MigrationPassResult result = pass({});
  EXPECT_TRUE(result.complete);
  ASSERT_EQ(result.moved.size(), 1u);
  EXPECT_EQ(result.moved[0].id, "shuffle_2_0_0");
  EXPECT_FALSE(fs::exists(root / "fallback" / "rdd_1_0"));
}

TEST_F(PluginDecommissionerTest, ReportsThatAreNotAboutThisPassChangeNothing) {
  make({"fallback"});
  pass({});
  MigrationPassProgress before = decommissioner->passProgress();
  for (const char* report :
       {"not json", "[]", R"({"block": "rdd_1_0"})", R"({"block": "rdd_1_0", "done": false})",
        R"({"block": 7, "done": true})", R"({"block": "rdd_9_9", "done": true})",
        R"({"block": "rdd_1_0", "done": true})" /* counted already */}) {
    report_progress(report);
  }
  MigrationPassProgress after = decommissioner->passProgress();
  EXPECT_EQ(after.blocks_moved, before.blocks_moved);
  EXPECT_EQ(after.bytes_moved, before.bytes_moved);
  EXPECT_EQ(after.blocks_moved, 3u);
}

// An answer that names an agent the plugin was not offered is not announced (readers would be
// sent where the block is not): the block stays here with the reason, and the next plugin in
// the list gets it.
TEST_F(PluginDecommissionerTest, AnAnswerNamingAnAgentNotOfferedIsNotAnnounced) {
  make({"elsewhere"});
  ClosedPort nobody;
  MigrationPassResult alone = pass({{"exec-9", nobody.url()}});
  EXPECT_FALSE(alone.complete);
  EXPECT_TRUE(alone.moved.empty());
  ASSERT_EQ(alone.failed.size(), 3u);
  for (const auto& [id, why] : alone.failed) {
    EXPECT_EQ(why,
              "elsewhere: answered executor_id 'exec-elsewhere', which is not a peer it was "
              "offered: readers would be sent to an agent that does not hold it; the block stays "
              "here")
        << id;
  }
  make({"elsewhere", "fallback"});
  MigrationPassResult next = pass({{"exec-9", nobody.url()}});
  EXPECT_TRUE(next.complete);
  ASSERT_EQ(next.moved.size(), 3u);
  for (const auto& info : next.moved) EXPECT_EQ(info.url, "fallback:" + info.id);
}

// An external store (an answer with a URL): announced with that URL once a reader's HEAD there
// finds the block whole, so the driver sends readers to it; refused, with what the HEAD got,
// when it does not.
TEST_F(PluginDecommissionerTest, AnExternalStoreIsAnnouncedOnlyWhereReadersFindTheBlock) {
  FakePeer dav(200, std::string(1000, 'a'));  // every block here has 1,000 bytes
  gPlace = {{"url", dav.url() + "/dav"}};
  make({"elsewhere"}, {}, {}, readersCanGet(root / "fallback", std::chrono::seconds(5), {}, {}));
  MigrationPassResult result = pass({});
  EXPECT_TRUE(result.complete);
  ASSERT_EQ(result.moved.size(), 3u);
  for (const auto& info : result.moved) {
    EXPECT_EQ(info.executor_id, "");
    EXPECT_EQ(info.url, dav.url() + "/dav/" + info.id);
  }

  FakePeer missing(404, "no such file");
  gPlace = {{"url", missing.url() + "/dav"}};
  make({"elsewhere"}, {}, {}, readersCanGet(root / "fallback", std::chrono::seconds(5), {}, {}));
  MigrationPassResult refused = pass({});
  EXPECT_FALSE(refused.complete);
  EXPECT_TRUE(refused.moved.empty());
  ASSERT_EQ(refused.failed.size(), 3u);
  for (const auto& [id, why] : refused.failed) {
    EXPECT_EQ(why, "elsewhere: answered url " + missing.url() + "/dav/" + id +
                       ", where readers cannot get it: HTTP 404 Not Found; the block stays here");
  }

  FakePeer short_copy(200, "only part");
  gPlace = {{"url", short_copy.url()}};
  make({"elsewhere"}, {}, {}, readersCanGet(root / "fallback", std::chrono::seconds(5), {}, {}));
  for (const auto& [id, why] : pass({}).failed) {
    EXPECT_NE(why.find("it is 9 bytes there, expected 1000"), std::string::npos) << why;
  }
}

// The other answers no reader could use: an agent and a URL at once, a URL no reader GETs, and
// the fallback store when the block is not in it.
TEST_F(PluginDecommissionerTest, AnswersNoReaderCouldUseAreRefusedWithTheReason) {
  ClosedPort nobody;
  const ReadableCheck check = readersCanGet(root / "fallback", std::chrono::seconds(5), {}, {});
  auto first_reason = [&](nlohmann::json place, const ReadableCheck& readable) {
    gPlace = std::move(place);
    make({"elsewhere"}, {}, {}, readable);
    MigrationPassResult result = pass({{"exec-9", nobody.url()}});
    EXPECT_TRUE(result.moved.empty());
    return result.failed.empty() ? std::string() : result.failed.front().second;
  };
  EXPECT_EQ(first_reason({{"executor_id", "exec-9"}, {"url", "http://store"}}, check),
            "elsewhere: answered both executor_id 'exec-9' and url 'http://store/rdd_1_0': a "
            "block lives in one place (a peer, or a store at a URL); the block stays here");
  EXPECT_EQ(first_reason({{"url", "s3://bucket"}}, check),
            "elsewhere: answered url 's3://bucket/rdd_1_0', which is no http:// or https:// URL "
            "a reader could GET; the block stays here");
  EXPECT_EQ(first_reason(nlohmann::json::object(), check),
            "elsewhere: answered the fallback store, where readers cannot get it: " +
                (root / "fallback" / "rdd_1_0").string() +
                " is not there (No such file or directory); the block stays here");
  // With no fallback_dir here the store is the plugin's own directory, which this agent
  // cannot see: the answer is taken (a reader's fetch failure would rerun the map).
  gPlace = nlohmann::json::object();
  make({"elsewhere"}, {}, {}, readersCanGet({}, std::chrono::seconds(5), {}, {}));
  EXPECT_EQ(pass({}).moved.size(), 3u);
}

}  // namespace
}  // namespace dockhand::agent
