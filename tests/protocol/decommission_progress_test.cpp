// Unit tests of the heartbeat's decommission object (protocol/decommission_progress.h): what the
// agent writes reads back the same on the driver, the totals are migrated + left, and a bad
// figure reads as absent instead of failing the heartbeat.
#include "dockhand/protocol/decommission_progress.h"

#include <gtest/gtest.h>

namespace dockhand::protocol {
namespace {

using nlohmann::json;

TEST(DecommissionProgressTest, WhatTheAgentWritesTheDriverReadsBack) {
  DecommissionProgress p;
  p.state = "migrating";
  p.running_tasks = 2;
  p.blocks_migrated = 5;
  p.blocks_failed = 1;
  p.blocks_left = 3;
  p.bytes_migrated = 5000;
  p.bytes_left = 3000;
  p.passes = 2;
  p.bytes_per_s = 1000;
  p.eta_ms = 3000;
  const json wire = toJson(p);
  EXPECT_EQ(wire["blocks_total"], 8);
  EXPECT_EQ(wire["bytes_total"], 8000);
  const auto read = readDecommissionProgress(json::parse(wire.dump()));
  ASSERT_TRUE(read.has_value());
  EXPECT_EQ(read->state, "migrating");
  EXPECT_EQ(read->running_tasks, 2u);
  EXPECT_EQ(read->blocks_migrated, 5u);
  EXPECT_EQ(read->blocks_failed, 1u);
  EXPECT_EQ(read->blocks_left, 3u);
  EXPECT_EQ(read->blocksTotal(), 8u);
  EXPECT_EQ(read->bytes_migrated, 5000u);
  EXPECT_EQ(read->bytesTotal(), 8000u);
  EXPECT_EQ(read->passes, 2u);
  EXPECT_EQ(read->bytes_per_s, 1000u);
  EXPECT_EQ(read->eta_ms, 3000u);
}

TEST(DecommissionProgressTest, NotDecommissioningIsNullBothWays) {
  EXPECT_TRUE(toJson(std::nullopt).is_null());
  EXPECT_FALSE(readDecommissionProgress(nullptr).has_value());
  EXPECT_FALSE(readDecommissionProgress(json::array()).has_value());
}

TEST(DecommissionProgressTest, AnUnknownRateIsNullAndReadsAsUnknown) {
  DecommissionProgress p;
  p.state = "waiting-for-tasks";
  const json wire = toJson(p);
  EXPECT_TRUE(wire["bytes_per_s"].is_null());
  EXPECT_TRUE(wire["eta_ms"].is_null());
  const auto read = readDecommissionProgress(wire);
  ASSERT_TRUE(read.has_value());
  EXPECT_FALSE(read->bytes_per_s.has_value());
  EXPECT_FALSE(read->eta_ms.has_value());
}

TEST(DecommissionProgressTest, BadFiguresReadAsAbsentNotAsAnError) {
  const json report = {{"state", 7},           {"blocks_migrated", -2}, {"blocks_left", "3"},
                       {"blocks_failed", 1.5}, {"bytes_per_s", -1},     {"eta_ms", "soon"},
                       {"passes", 4}};
  const auto read = readDecommissionProgress(report);
  ASSERT_TRUE(read.has_value());
  EXPECT_EQ(read->state, "");
  EXPECT_EQ(read->blocks_migrated, 0u);
  EXPECT_EQ(read->blocks_left, 0u);
  EXPECT_EQ(read->blocks_failed, 0u);
  EXPECT_FALSE(read->bytes_per_s.has_value());
  EXPECT_FALSE(read->eta_ms.has_value());
  EXPECT_EQ(read->passes, 4u) << "the good figures of a report with bad ones still count";
}

}  // namespace
}  // namespace dockhand::protocol
