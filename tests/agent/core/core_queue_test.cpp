// Unit tests of CoreQueue: when a task starts, the order in which waiting tasks start, and
// taking tasks out (a kill, decommission, exit) without disturbing the others.
#include "core/core_queue.h"

#include <gtest/gtest.h>

namespace dockhand::agent {
namespace {

protocol::TaskDescription taskOf(std::uint64_t id, int cpus) {
  protocol::TaskDescription task;
  task.task_id = id;
  task.cpus = cpus;
  return task;
}

std::vector<std::uint64_t> idsOf(const CoreQueue& queue) {
  std::vector<std::uint64_t> ids;
  queue.appendIds(ids);
  return ids;
}

TEST(CoreQueueTest, ATaskStartsWhenItFitsBesideTheCoresInUse) {
  const CoreQueue queue(4);
  EXPECT_EQ(queue.cores(), 4);
  EXPECT_TRUE(queue.startsNow(1, 0));
  EXPECT_TRUE(queue.startsNow(2, 2));
  EXPECT_TRUE(queue.startsNow(4, 0));
  EXPECT_FALSE(queue.startsNow(3, 2));
  EXPECT_FALSE(queue.startsNow(1, 4));
}

TEST(CoreQueueTest, ATaskLargerThanTheAgentStartsWhenNothingRuns) {
  CoreQueue queue(2);
  EXPECT_TRUE(queue.startsNow(8, 0));
  EXPECT_FALSE(queue.startsNow(8, 1));
  queue.push(taskOf(1, 8), TimePoint{});
  EXPECT_FALSE(queue.takeNextThatFits(1).has_value());
  auto next = queue.takeNextThatFits(0);
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(next->task.task_id, 1U);
}

TEST(CoreQueueTest, NothingOvertakesAWaitingTask) {
  CoreQueue queue(4);
  queue.push(taskOf(1, 4), TimePoint{});
  // One core would fit beside the three in use, but task 1 waits before it.
  EXPECT_FALSE(queue.startsNow(1, 3));
  queue.push(taskOf(2, 1), TimePoint{});
  EXPECT_FALSE(queue.takeNextThatFits(3).has_value());
  EXPECT_EQ(idsOf(queue), (std::vector<std::uint64_t>{1, 2}));
}

TEST(CoreQueueTest, WaitingTasksStartInArrivalOrderWithTheirArrivalTime) {
  CoreQueue queue(2);
  const TimePoint t0{};
  queue.push(taskOf(7, 1), t0 + Millis(1));
  queue.push(taskOf(8, 1), t0 + Millis(2));
  queue.push(taskOf(9, 2), t0 + Millis(3));
  int in_use = 1;
  std::vector<std::uint64_t> started;
  while (auto next = queue.takeNextThatFits(in_use)) {
    started.push_back(next->task.task_id);
    in_use += next->task.cpus;
  }
  // 7 fits beside the running core; 8 does not until something ends, and 9 waits behind 8.
  EXPECT_EQ(started, (std::vector<std::uint64_t>{7}));
  in_use = 0;
  while (auto next = queue.takeNextThatFits(in_use)) {
    started.push_back(next->task.task_id);
    EXPECT_EQ(next->received, t0 + Millis(next->task.task_id == 8 ? 2 : 3));
    in_use += next->task.cpus;
  }
  EXPECT_EQ(started, (std::vector<std::uint64_t>{7, 8}));
  EXPECT_EQ(queue.size(), 1U);
}

TEST(CoreQueueTest, AKilledTaskLeavesTheOthersInOrder) {
  CoreQueue queue(1);
  for (std::uint64_t id : {1, 2, 3}) queue.push(taskOf(id, 1), TimePoint{});
  EXPECT_TRUE(queue.contains(2));
  auto taken = queue.take(2);
  ASSERT_TRUE(taken.has_value());
  EXPECT_EQ(taken->task.task_id, 2U);
  EXPECT_FALSE(queue.contains(2));
  EXPECT_FALSE(queue.take(2).has_value());
  EXPECT_FALSE(queue.take(42).has_value());
  EXPECT_EQ(idsOf(queue), (std::vector<std::uint64_t>{1, 3}));
}

TEST(CoreQueueTest, TakeAllEmptiesTheQueueInArrivalOrder) {
  CoreQueue queue(1);
  EXPECT_TRUE(queue.takeAll().empty());
  for (std::uint64_t id : {5, 3, 4}) queue.push(taskOf(id, 1), TimePoint{});
  auto all = queue.takeAll();
  ASSERT_EQ(all.size(), 3U);
  EXPECT_EQ(all[0].task.task_id, 5U);
  EXPECT_EQ(all[1].task.task_id, 3U);
  EXPECT_EQ(all[2].task.task_id, 4U);
  EXPECT_TRUE(queue.empty());
  EXPECT_TRUE(queue.startsNow(1, 0));
}

}  // namespace
}  // namespace dockhand::agent
