// What the block server reads from a request: the route of a URI and the Range header.
#include "blocks/block_request.h"

#include <gtest/gtest.h>

namespace dockhand::agent {
namespace {

TEST(BlockRequestTest, RoutesPathsAndIgnoresTheQuery) {
  EXPECT_EQ(routeBlockRequest("/healthz").route, BlockRoute::kHealth);
  EXPECT_EQ(routeBlockRequest("/healthz?verbose=1").route, BlockRoute::kHealth);
  EXPECT_EQ(routeBlockRequest("/v1/status").route, BlockRoute::kStatus);
  EXPECT_EQ(routeBlockRequest("/metrics").route, BlockRoute::kMetrics);
  EXPECT_EQ(routeBlockRequest("/metrics?x=1").route, BlockRoute::kMetrics);
  EXPECT_EQ(routeBlockRequest("/readyz").route, BlockRoute::kReady);
  auto block = routeBlockRequest("/blocks/shuffle_0_1_2?x=/etc");
  EXPECT_EQ(block.route, BlockRoute::kBlock);
  EXPECT_EQ(block.id, "shuffle_0_1_2");
  EXPECT_EQ(block.path, "/blocks/shuffle_0_1_2");
  auto escape = routeBlockRequest("/blocks/../etc/passwd");
  EXPECT_EQ(escape.route, BlockRoute::kInvalidId);
  EXPECT_EQ(escape.id, "../etc/passwd");
  EXPECT_EQ(routeBlockRequest("/blocks/").route, BlockRoute::kInvalidId);
  EXPECT_EQ(routeBlockRequest("/blocks").route, BlockRoute::kNotFound);
  EXPECT_EQ(routeBlockRequest("").route, BlockRoute::kNotFound);
  EXPECT_EQ(routeBlockRequest("/healthz/").route, BlockRoute::kNotFound);
}

TEST(BlockRequestTest, ReadsTheThreeRangeForms) {
  auto closed = parseRange("bytes=2-5", 20);
  ASSERT_TRUE(closed && closed->satisfiable);
  EXPECT_EQ(closed->first, 2u);
  EXPECT_EQ(closed->last, 5u);
  auto open = parseRange("bytes=18-", 20);
  ASSERT_TRUE(open && open->satisfiable);
  EXPECT_EQ(open->first, 18u);
  EXPECT_EQ(open->last, 19u);
  auto suffix = parseRange("bytes=-3", 20);
  ASSERT_TRUE(suffix && suffix->satisfiable);
  EXPECT_EQ(suffix->first, 17u);
  EXPECT_EQ(suffix->last, 19u);
  auto clipped = parseRange("bytes=5-18446744073709551615", 20);
  ASSERT_TRUE(clipped && clipped->satisfiable);
  EXPECT_EQ(clipped->last, 19u);
}

TEST(BlockRequestTest, UnsatisfiableAndUnusableRanges) {
  EXPECT_FALSE(parseRange("bytes=40-", 20)->satisfiable);
  EXPECT_FALSE(parseRange("bytes=-0", 20)->satisfiable);
  EXPECT_FALSE(parseRange("bytes=0-", 0)->satisfiable);
  EXPECT_FALSE(parseRange("bytes=-5", 0)->satisfiable);
  for (const char* header : {"", "bytes=", "bytes=-", "bytes=5-2", "bytes=1-2,4-5", "items=1-2",
                             "bytes=a-b", "bytes=18446744073709551616-", "bytes= 1-2"}) {
    EXPECT_FALSE(parseRange(header, 20).has_value()) << header;
  }
}

}  // namespace
}  // namespace dockhand::agent

namespace dockhand::agent {
namespace {

TEST(BlockRequestTest, RoutesLogPaths) {
  auto agent = routeBlockRequest("/v1/logs/agent/stderr?start=-10");
  EXPECT_EQ(agent.route, BlockRoute::kAgentLog);
  EXPECT_EQ(agent.stream, "stderr");
  EXPECT_EQ(agent.query, "start=-10");
  EXPECT_EQ(agent.path, "/v1/logs/agent/stderr");
  auto task = routeBlockRequest("/v1/tasks/18446744073709551615/logs/stdout");
  EXPECT_EQ(task.route, BlockRoute::kTaskLog);
  EXPECT_EQ(task.task_id, 18446744073709551615ULL);
  EXPECT_EQ(task.stream, "stdout");
  // A plain name the agent may not have is routed (the server answers 404 for it).
  EXPECT_EQ(routeBlockRequest("/v1/tasks/7/logs/other").route, BlockRoute::kTaskLog);
  for (const char* bad :
       {"/v1/tasks/../logs/stdout", "/v1/tasks/7/logs/../../etc/passwd", "/v1/tasks/7/logs/",
        "/v1/tasks/-1/logs/stdout", "/v1/tasks/18446744073709551616/logs/stdout",
        "/v1/tasks/7/stdout", "/v1/tasks/", "/v1/tasks/7", "/v1/logs/agent/", "/v1/logs/x/stdout",
        "/v1/logs/agent/std%2fout", "/v1/tasks/%37/logs/stdout", "/v1/tasks/7/logs/STDOUT",
        "/v1/tasks/7/logs/stdout/"}) {
    auto routed = routeBlockRequest(bad);
    EXPECT_EQ(routed.route, BlockRoute::kBadLogPath) << bad;
    EXPECT_FALSE(routed.error.empty()) << bad;
  }
  EXPECT_EQ(routeBlockRequest("/v1/logs").route, BlockRoute::kNotFound);
}

TEST(BlockRequestTest, ReadsALogWindowFromTheQuery) {
  using Kind = LogWindow::Kind;
  auto whole = parseLogWindow("", std::nullopt, 100);
  EXPECT_EQ(whole.kind, Kind::kWhole);
  EXPECT_EQ(whole.count, 100u);
  auto part = parseLogWindow("start=10&length=5", std::nullopt, 100);
  EXPECT_EQ(part.kind, Kind::kQuery);
  EXPECT_EQ(part.first, 10u);
  EXPECT_EQ(part.count, 5u);
  auto clipped = parseLogWindow("start=95&length=50", std::nullopt, 100);
  EXPECT_EQ(clipped.first, 95u);
  EXPECT_EQ(clipped.count, 5u);
  auto tail = parseLogWindow("start=-30", std::nullopt, 100);
  EXPECT_EQ(tail.first, 70u);
  EXPECT_EQ(tail.count, 30u);
  auto long_tail = parseLogWindow("start=-9223372036854775808", std::nullopt, 100);
  EXPECT_EQ(long_tail.first, 0u);
  EXPECT_EQ(long_tail.count, 100u);
  auto head = parseLogWindow("length=7", std::nullopt, 100);
  EXPECT_EQ(head.first, 0u);
  EXPECT_EQ(head.count, 7u);
  auto at_end = parseLogWindow("start=100", std::nullopt, 100);  // nothing new yet
  EXPECT_EQ(at_end.kind, Kind::kQuery);
  EXPECT_EQ(at_end.count, 0u);
  EXPECT_EQ(parseLogWindow("start=101", std::nullopt, 100).kind, Kind::kUnsatisfiable);
  for (const char* bad : {"start=x", "start=", "length=-1", "start=1&start=2", "offset=3",
                          "start=99999999999999999999", "length=1e3"}) {
    auto window = parseLogWindow(bad, std::nullopt, 100);
    EXPECT_EQ(window.kind, Kind::kBad) << bad;
    EXPECT_FALSE(window.error.empty()) << bad;
  }
}

TEST(BlockRequestTest, ReadsALogWindowFromARangeHeader) {
  using Kind = LogWindow::Kind;
  auto range = parseLogWindow("", "bytes=2-4", 10);
  EXPECT_EQ(range.kind, Kind::kRange);
  EXPECT_EQ(range.first, 2u);
  EXPECT_EQ(range.count, 3u);
  auto suffix = parseLogWindow("", "bytes=-3", 10);
  EXPECT_EQ(suffix.first, 7u);
  EXPECT_EQ(suffix.count, 3u);
  EXPECT_EQ(parseLogWindow("", "bytes=10-", 10).kind, Kind::kUnsatisfiable);
  EXPECT_EQ(parseLogWindow("", "bytes=0-1,3-4", 10).kind, Kind::kBad);
  EXPECT_EQ(parseLogWindow("", "lines=1-2", 10).kind, Kind::kBad);
  EXPECT_EQ(parseLogWindow("start=1", "bytes=0-1", 10).kind, Kind::kBad);
}

}  // namespace
}  // namespace dockhand::agent
