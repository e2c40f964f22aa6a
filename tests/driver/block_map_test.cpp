#include "dockhand/driver/block_map.h"

#include <map>
#include <stdexcept>

#include <gtest/gtest.h>

namespace dockhand::driver {
namespace {

protocol::BlockInfo info(const std::string& id, const std::string& holder,
                         const std::string& checksum = "xxh64:00000000000000aa") {
  protocol::BlockInfo b;
  b.id = id;
  b.size = 42;
  b.checksum = checksum;
  b.executor_id = holder;
  b.url = holder.empty() ? "fallback:" + id : "http://" + holder + ":7337/blocks/" + id;
  return b;
}

TEST(BlockMapTest, AddRecordsTheBlockAtItsHolder) {
  BlockMap blocks;
  EXPECT_TRUE(blocks.empty());
  blocks.add(info("b0", "a"));
  ASSERT_EQ(blocks.size(), 1u);
  const BlockLocation* b0 = blocks.find("b0");
  ASSERT_NE(b0, nullptr);
  EXPECT_EQ(b0->id, "b0");
  EXPECT_EQ(b0->size, 42u);
  EXPECT_EQ(b0->checksum, "xxh64:00000000000000aa");
  ASSERT_EQ(b0->holders.size(), 1u);
  EXPECT_EQ(b0->holders.at("a"), "http://a:7337/blocks/b0");
  EXPECT_EQ(blocks.find("b1"), nullptr);
}

TEST(BlockMapTest, SecondHolderJoinsAndANewUrlReplacesTheOld) {
  BlockMap blocks;
  blocks.add(info("b0", "a"));
  blocks.add(info("b0", ""));
  protocol::BlockInfo moved = info("b0", "a");
  moved.url = "http://a:8000/blocks/b0";
  blocks.add(moved);
  ASSERT_EQ(blocks.size(), 1u);
  const BlockLocation& b0 = blocks.at("b0");
  ASSERT_EQ(b0.holders.size(), 2u);
  EXPECT_EQ(b0.holders.at(""), "fallback:b0");
  EXPECT_EQ(b0.holders.at("a"), "http://a:8000/blocks/b0");
}

TEST(BlockMapTest, ChecksumIsKeptWhenALaterHolderTellsNone) {
  BlockMap blocks;
  blocks.add(info("b0", "a", "xxh64:1"));
  blocks.add(info("b0", "b", ""));
  EXPECT_EQ(blocks.at("b0").checksum, "xxh64:1");
  blocks.add(info("b0", "c", "xxh64:2"));
  EXPECT_EQ(blocks.at("b0").checksum, "xxh64:2");
}

TEST(BlockMapTest, NewBlockTakesAnEmptyChecksumAsTold) {
  BlockMap blocks;
  blocks.add(info("b0", "a", ""));
  EXPECT_EQ(blocks.at("b0").checksum, "");
}

TEST(BlockMapTest, RemoveHolderErasesTheBlockOnlyWithItsLastHolder) {
  BlockMap blocks;
  blocks.add(info("b0", "a"));
  blocks.add(info("b0", "b"));
  EXPECT_FALSE(blocks.removeHolder("b0", "a"));
  ASSERT_NE(blocks.find("b0"), nullptr);
  EXPECT_EQ(blocks.at("b0").holders.count("a"), 0u);
  EXPECT_FALSE(blocks.removeHolder("b0", "c"));  // not a holder: nothing changes
  EXPECT_EQ(blocks.at("b0").holders.size(), 1u);
  EXPECT_TRUE(blocks.removeHolder("b0", "b"));
  EXPECT_EQ(blocks.find("b0"), nullptr);
  EXPECT_TRUE(blocks.empty());
}

TEST(BlockMapTest, RemoveHolderOfAnUnknownBlockIsFalse) {
  BlockMap blocks;
  EXPECT_FALSE(blocks.removeHolder("nope", "a"));
  EXPECT_TRUE(blocks.empty());
}

TEST(BlockMapTest, DropHolderReturnsTheBlocksLeftWithNoHolderInIdOrder) {
  BlockMap blocks;
  blocks.add(info("b2", "a"));
  blocks.add(info("b0", "a"));
  blocks.add(info("b1", "a"));
  blocks.add(info("b1", ""));  // also in the fallback store: survives
  blocks.add(info("b3", "b"));
  const std::vector<std::string> gone = blocks.dropHolder("a");
  EXPECT_EQ(gone, (std::vector<std::string>{"b0", "b2"}));
  EXPECT_EQ(blocks.size(), 2u);
  ASSERT_NE(blocks.find("b1"), nullptr);
  EXPECT_EQ(blocks.at("b1").holders.count("a"), 0u);
  EXPECT_NE(blocks.find("b3"), nullptr);
  EXPECT_TRUE(blocks.dropHolder("a").empty());
}

TEST(BlockMapTest, DropHolderExceptKeepsTheListedBlocksOnly) {
  BlockMap blocks;
  blocks.add(info("b0", "a"));  // a's only: lost when not kept
  blocks.add(info("b1", "a"));  // kept
  blocks.add(info("b2", "a"));
  blocks.add(info("b2", "b"));  // also on b: a goes, the block stays
  const std::vector<std::string> gone = blocks.dropHolderExcept("a", {"b1", "b9"});
  EXPECT_EQ(gone, std::vector<std::string>{"b0"});
  EXPECT_EQ(blocks.find("b0"), nullptr);
  ASSERT_NE(blocks.find("b1"), nullptr);
  EXPECT_EQ(blocks.at("b1").holders.count("a"), 1u);
  ASSERT_NE(blocks.find("b2"), nullptr);
  EXPECT_EQ(blocks.at("b2").holders.count("a"), 0u);
  EXPECT_EQ(blocks.at("b2").holders.count("b"), 1u);
  EXPECT_EQ(blocks.find("b9"), nullptr) << "a kept id that was never there is not made up";
}

TEST(BlockMapTest, HeldByCountsEachHolderAndTheStoresApart) {
  BlockMap blocks;
  blocks.add(info("b0", "a"));
  blocks.add(info("b1", "a"));
  blocks.add(info("b1", ""));
  blocks.add(info("b2", ""));
  protocol::BlockInfo external = info("b3", "");
  external.url = "https://store.example/dockhand/b3";
  blocks.add(external);
  EXPECT_EQ(blocks.heldBy("a"), 2u);
  EXPECT_EQ(blocks.heldBy(""), 3u) << "out of the agents: the fallback store and external ones";
  EXPECT_EQ(blocks.heldBy("b"), 0u);
  const BlockMap::HolderCounts counts = blocks.countByHolder();
  const std::map<std::string, std::size_t> agents{{"a", 2u}};
  EXPECT_EQ(counts.agents, agents) << "the same counts in one pass";
  EXPECT_EQ(counts.of("a"), 2u);
  EXPECT_EQ(counts.of("b"), 0u);
  EXPECT_EQ(counts.fallback, 2u);
  EXPECT_EQ(counts.external, 1u);
}

TEST(BlockMapTest, AtThrowsForABlockNoHolderHas) {
  BlockMap blocks;
  EXPECT_THROW(blocks.at("b0"), std::out_of_range);
}

}  // namespace
}  // namespace dockhand::driver
