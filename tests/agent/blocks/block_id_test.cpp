#include "blocks/block_id.h"

#include <string>

#include <gtest/gtest.h>

namespace dockhand::agent {
namespace {

TEST(BlockIdTest, AcceptsTheThreeForms) {
  EXPECT_EQ(parseBlockId("shuffle_0_3_1"), BlockKind::kShuffle);
  EXPECT_EQ(parseBlockId("shuffle_12_345_6789"), BlockKind::kShuffle);
  EXPECT_EQ(parseBlockId("rdd_4_12"), BlockKind::kRdd);
  EXPECT_EQ(parseBlockId("task_17_summary.csv"), BlockKind::kTask);
  EXPECT_EQ(parseBlockId("task_17_part_0-a.bin"), BlockKind::kTask);
}

TEST(BlockIdTest, RefusesIdThatEscapesDirectory) {
  for (const char* id : {"", ".", "..", "../etc/passwd", "task_1_..", "task_1_../x", "task_1_a/b",
                         "rdd_1_2/../../x", "/rdd_1_2", "task_1_.hidden", "shuffle_0_1_2/"}) {
    EXPECT_FALSE(isValidBlockId(id)) << id;
  }
}

TEST(BlockIdTest, RefusesMalformedIds) {
  for (const char* id : {"shuffle_0_1", "shuffle_0_1_2_3", "shuffle_a_1_2", "shuffle__1_2",
                         "shuffle_-1_1_2", "rdd_1", "rdd_1_2_3", "rdd_x_1", "task_x_name",
                         "task_1_", "task__name", "block_1", "RDD_1_2", "rdd_1_2 ", "task_1_na me",
                         "task_1_na\nme", "shuffle_00000000000000000001_1_1"}) {
    EXPECT_FALSE(isValidBlockId(id)) << id;
  }
  EXPECT_FALSE(isValidBlockId("task_1_" + std::string(201, 'a')));
  EXPECT_TRUE(isValidBlockId("task_1_" + std::string(200, 'a')));
}

}  // namespace
}  // namespace dockhand::agent
