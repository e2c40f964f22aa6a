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
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

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

class PluginDecommissionerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/dockhand-decommissioner-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root = tmpl;
    fs::create_directories(root / "fallback");
    store = std::make_unique<BlockStore>(root / "blocks");
    for (const char* id : {"rdd_1_0", "shuffle_2_0_0", "task_3_result"}) addBlock(id, 1000);
  }
  void TearDown() override {
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
      config["max_failures_per_block"] = 1;
      config["timeout_ms"] = 2000;
    }
    if (name == "fallback") config["dir"] = (root / "fallback").string();
    return host.createBlockMigration(name, config.dump(), std::move(progress));
  }

  void make(std::vector<std::string> names, MigrationKinds kinds = {}) {
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
        kinds, nullptr);
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

}  // namespace
}  // namespace dockhand::agent
