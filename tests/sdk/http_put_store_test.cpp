// The http-put SDK example (built out of tree against the installed SDK) against a real nginx
// with its WebDAV module: blocks PUT there, announced with the store's URL, and read there by
// the reduces of a real job under the real driver after their agent decommissioned; `dockhand
// plugins check` of it; and a cancel() that wakes a PUT blocked on a store that stopped reading.
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <future>
#include <string>

#include <Poco/Net/ServerSocket.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "plugins/plugin_host.h"
#include "support/agent_command.h"
#include "support/nginx.h"
#include "support/process.h"
#include "support/shuffle_job.h"

namespace dockhand::testing {
namespace {

namespace fs = std::filesystem;
using agent::PluginHost;
using nlohmann::json;
using std::chrono_literals::operator""s;

const fs::path kExamples = DOCKHAND_SDK_EXAMPLES_BUILD_DIR;

std::string httpPutPlugin() { return (kExamples / "http-put" / "dockhand-http-put.so").string(); }

class HttpPutStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (Nginx::binary().empty()) {
      if (Nginx::required()) FAIL() << "DOCKHAND_REQUIRE_NGINX=1 but nginx is not installed";
      GTEST_SKIP() << "nginx is not installed (scripts/setup installs it)";
    }
    nginx = std::make_unique<Nginx>(dir.path() / "nginx");
  }

  TempDir dir;
  std::unique_ptr<Nginx> nginx;
};

// A job's maps write shuffle blocks on two agents; agent-a is decommissioned while its maps
// run, PUTs its blocks to nginx and leaves; the reduces GET them from nginx, as the driver was
// told: the job succeeds with the right sum and no map ran twice.
TEST_F(HttpPutStoreTest, ADecommissionedAgentsBlocksAreReadFromTheStore) {
  const fs::path job = writeShuffleJob(dir.path(), "3");
  const fs::path config = dir.path() / "agent.json";
  writeFile(
      config,
      json{{"block_port", 0},
           {"decommission",
            {{"enabled", true},
             {"deadline_ms", 60000},
             {"check_interval_ms", 100},
             {"migration", {{{"name", httpPutPlugin()}, {"config", {{"url", nginx->davUrl()}}}}}}}}}
          .dump());
  int port = 0;
  auto driver = startJobDriver(
      job, {"--local-agents", "0", "--min-agents", "2", "--timeout", "120", "--log-level", "info"},
      dir.path() / "port", dir.path() / "driver.log", port);
  ASSERT_NE(port, 0) << driver->output();
  auto start = [&](const std::string& id) {
    const AgentCommand command{.config = config,
                               .driver_url = "ws://127.0.0.1:" + std::to_string(port) + "/",
                               .executor_id = id,
                               .app_id = "http-put-store-test",
                               .work_dir = dir.path() / ("work-" + id)};
    return std::make_unique<ChildProcess>(command.argv(), (dir.path() / (id + ".log")).string());
  };
  auto a = start("agent-a");
  auto b = start("agent-b");
  auto logs = [&] {
    return "\n--- agent-a:\n" + a->output() + "\n--- agent-b:\n" + b->output() + "\n--- nginx:\n" +
           nginx->accessLog() + nginx->errorLog();
  };
  ASSERT_TRUE(waitUntil([&] { return shuffleMapsStarted(dir.path()); }, 30s))
      << driver->output() << logs();
  ChildProcess command(
      {driverBinary(), "decommission", "agent-a", "--driver", "127.0.0.1:" + std::to_string(port)},
      (dir.path() / "command.log").string());
  EXPECT_EQ(command.waitExit(15s), 0) << command.output();
  EXPECT_EQ(a->waitExit(60s), 0) << logs();
  ASSERT_EQ(driver->waitExit(90s), 0) << driver->output() << logs();

  const std::string out = driver->output();
  EXPECT_TRUE(contains(out, "job shuffle SUCCEEDED")) << out << logs();
  EXPECT_TRUE(contains(out, "0 map tasks rerun for lost blocks")) << out << logs();
  int maps_on_a = 0;
  for (const auto& line : linesStartingWith(out, "map-")) {
    EXPECT_TRUE(contains(line, "attempts=1")) << "a map ran twice: " << line;
    if (contains(line, "agent-a")) ++maps_on_a;
  }
  ASSERT_GT(maps_on_a, 0) << "no map ran on agent-a: nothing was migrated\n" << out;
  // Each of agent-a's blocks: PUT, checked by the agent's HEAD, read by a reduce's GET.
  const std::string requests = nginx->accessLog();
  EXPECT_EQ(count(requests, "PUT /dav/shuffle_0_"), maps_on_a * kShuffleReducers) << requests;
  EXPECT_EQ(count(requests, "HEAD /dav/shuffle_0_"), maps_on_a * kShuffleReducers) << requests;
  EXPECT_EQ(count(requests, "GET /dav/shuffle_0_"), maps_on_a * kShuffleReducers) << requests;
  EXPECT_FALSE(contains(requests, " 404 ")) << requests;
  EXPECT_FALSE(contains(a->output(), "where readers cannot get it")) << logs();
}

// `dockhand plugins check` PUTs its scratch block to the store and reads it back at the URL
// the plugin answered.
TEST_F(HttpPutStoreTest, PluginsCheckReadsTheBlockBackFromTheStore) {
  const fs::path config = dir.path() / "agent.json";
  writeFile(
      config,
      json{{"decommission",
            {{"migration",
              {{{"name", httpPutPlugin()}, {"config", {{"url", nginx->davUrl() + "/check"}}}}}}}}}
          .dump());
  ChildProcess check({agentBinary(), "plugins", "check", "--config", config.string()},
                     (dir.path() / "check.log").string());
  ASSERT_EQ(check.waitExit(60s), 0) << check.output() << nginx->accessLog();
  EXPECT_TRUE(contains(check.output(), "read back there")) << check.output();
  EXPECT_TRUE(contains(check.output(), nginx->davUrl() + "/check/task_0_dockhand-plugins-check-"))
      << check.output();
}

// A store that refuses the PUT (a location without the dav module answers 405): the block
// fails with what the store said, and nothing is announced.
TEST_F(HttpPutStoreTest, AStoreThatRefusesThePutFailsTheBlockWithItsAnswer) {
  writeFile(dir.path() / "rdd_1_0", "block bytes");
  PluginHost host({});
  auto plugin = host.createBlockMigration(
      httpPutPlugin(), json{{"url", nginx->url() + "/plain"}}.dump(), [](std::string_view) {});
  auto result = plugin->migrate(json{
      {"blocks", {{{"id", "rdd_1_0"}, {"path", (dir.path() / "rdd_1_0").string()}}}},
      {"peers", json::array()}}.dump());
  ASSERT_TRUE(result.ok()) << result.error;
  const json answer = json::parse(result.json);
  EXPECT_TRUE(answer["migrated"].empty()) << result.json;
  ASSERT_EQ(answer["failed"].size(), 1u) << result.json;
  EXPECT_EQ(answer["failed"][0]["reason"], "the store answered 'HTTP/1.1 405 Not Allowed'")
      << result.json;
}

// A store that took the connection and stopped reading: the PUT blocks in send() once the
// socket's buffers are full. cancel() from another thread wakes it (dockhand/cancel.hpp); the
// call returns with the block failed as "cancelled" instead of waiting out the 30 s timeout.
TEST_F(HttpPutStoreTest, CancelWakesAPutBlockedOnAStoreThatStoppedReading) {
  Poco::Net::ServerSocket silent(Poco::Net::SocketAddress("127.0.0.1", 0));  // never accepts
  const fs::path block = dir.path() / "rdd_2_0";
  {
    const int fd = ::open(block.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::ftruncate(fd, 256L << 20), 0);  // more than any socket buffer holds
    ::close(fd);
  }
  PluginHost host({});
  auto plugin = host.createBlockMigration(
      httpPutPlugin(),
      json{{"url", "http://127.0.0.1:" + std::to_string(silent.address().port()) + "/dav"}}.dump(),
      [](std::string_view) {});
  auto call = std::async(std::launch::async, [&] {
    return plugin->migrate(json{
        {"blocks", {{{"id", "rdd_2_0"}, {"path", block.string()}}}},
        {"peers",
         json::array()}}.dump());
  });
  EXPECT_EQ(call.wait_for(1s), std::future_status::timeout) << "the PUT should block";
  plugin->cancel();
  ASSERT_EQ(call.wait_for(10s), std::future_status::ready) << "cancel() did not wake it";
  auto result = call.get();
  ASSERT_TRUE(result.ok()) << result.error;
  const json answer = json::parse(result.json);
  ASSERT_EQ(answer["failed"].size(), 1u) << result.json;
  EXPECT_EQ(answer["failed"][0]["reason"], "cancelled") << result.json;
}

}  // namespace
}  // namespace dockhand::testing
