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
