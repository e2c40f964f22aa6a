// The Backend keeps tasks within the registered cores: a LaunchTask that does not fit waits,
// in arrival order, and starts when running tasks end; a waiting task is killed without
// starting, answered LOST when decommissioning begins and KILLED on exit.
#include <cstdint>
#include <utility>
#include <vector>

#include "backend_harness.h"

namespace dockhand::agent::backend_testing {
namespace {

std::vector<std::uint64_t> launched(const Harness& h, std::uint64_t up_to) {
  std::vector<std::uint64_t> ids;
  for (std::uint64_t id = 1; id <= up_to; ++id) {
    if (h.executor.launchCount(id) > 0) ids.push_back(id);
  }
  return ids;
}

// Registered (4 cores), then tasks 1..`tasks` launched (1 cpu each): 5 and up wait.
void launchTasks(Harness& h, std::uint64_t tasks) {
  h.runToRunning();
  for (std::uint64_t id = 1; id <= tasks; ++id) h.launch(id);
}

TEST(BackendCoresTest, TasksBeyondTheCoresWaitAndStartInOrderAsOthersEnd) {
  Harness h;  // 4 cores
  launchTasks(h, 6);
  EXPECT_EQ(launched(h, 6), (std::vector<std::uint64_t>{1, 2, 3, 4}));
  EXPECT_EQ(h.backend.runningTasks(), 4u);
  EXPECT_EQ(h.backend.waitingTasks(), 2u);
  EXPECT_EQ(h.backend.coresInUse(), 4);
  EXPECT_EQ(h.backend.statusJson()["waiting_tasks"], 2);
  EXPECT_TRUE(h.statusUpdates().empty()) << "a waiting task says nothing yet";

  h.report(3, TaskState::kFinished);
  EXPECT_EQ(launched(h, 6), (std::vector<std::uint64_t>{1, 2, 3, 4, 5}));
  h.report(5, TaskState::kRunning);  // not an end: nothing more starts
  EXPECT_EQ(h.backend.waitingTasks(), 1u);
  h.report(1, TaskState::kFailed, "boom");
  EXPECT_EQ(launched(h, 6), (std::vector<std::uint64_t>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(h.backend.waitingTasks(), 0u);
  EXPECT_EQ(h.backend.coresInUse(), 4);
}

// The link keeps frames to write them together; while no more than twice the cores' worth of
// tasks wait, a status that frees cores for a waiting task is written out before that task's
// launch, so that a driver sending tasks ahead hears of it without waiting for the launch work.
TEST(BackendCoresTest, AnEndThatLetsAWaitingTaskStartIsWrittenOutBeforeItsLaunch) {
  Harness h;  // 4 cores
  launchTasks(h, 5);
  std::vector<std::pair<std::size_t, std::size_t>> at_flush;  // (statuses sent, tasks launched)
  h.link.on_flush = [&] { at_flush.emplace_back(h.statusUpdates().size(), launched(h, 5).size()); };
  h.report(2, TaskState::kRunning);
  EXPECT_TRUE(at_flush.empty()) << "RUNNING frees nothing";
  h.report(3, TaskState::kFinished);
  ASSERT_EQ(at_flush.size(), 1u);
  EXPECT_EQ(at_flush[0], (std::pair<std::size_t, std::size_t>{2, 4})) << "before task 5 started";
  EXPECT_EQ(launched(h, 5).size(), 5u);
  h.report(4, TaskState::kFinished);
  EXPECT_EQ(h.link.flush_calls, 1) << "nothing waits any more: the link batches as it likes";
}

// While more than twice the cores' worth of tasks wait, a freed core's status is left to the
// link's idle flush (the tasks' statuses then share writes): no core can idle before the
// driver's next tasks come.
TEST(BackendCoresTest, AnEndWithManyWaitingLeavesItsWriteToTheIdleFlush) {
  Harness h;  // 4 cores
  launchTasks(h, 14);
  std::vector<std::pair<std::size_t, std::size_t>> at_flush;  // (statuses sent, tasks launched)
  h.link.on_flush = [&] {
    at_flush.emplace_back(h.statusUpdates().size(), launched(h, 14).size());
  };
  h.report(1, TaskState::kFinished);  // 10 wait
  h.report(2, TaskState::kFinished);  // 9 wait
  EXPECT_TRUE(at_flush.empty());
  EXPECT_EQ(launched(h, 14).size(), 6u);
  h.report(3, TaskState::kFinished);  // 8 wait: twice the cores
  ASSERT_EQ(at_flush.size(), 1u);
  EXPECT_EQ(at_flush[0], (std::pair<std::size_t, std::size_t>{3, 6})) << "before task 7 started";
  EXPECT_EQ(launched(h, 14).size(), 7u);
}

TEST(BackendCoresTest, AWaitingTaskIsNotOvertakenByASmallerOne) {
  Harness h;
  h.runToRunning();
  h.launch(1, /*cpus=*/3);
  h.launch(2, /*cpus=*/2);  // 5 > 4: waits
  h.launch(3, /*cpus=*/1);  // would fit, but waits behind 2
  EXPECT_EQ(launched(h, 3), (std::vector<std::uint64_t>{1}));
  h.report(1, TaskState::kFinished);
  EXPECT_EQ(launched(h, 3), (std::vector<std::uint64_t>{1, 2, 3}));
  EXPECT_EQ(h.backend.coresInUse(), 3);
}

TEST(BackendCoresTest, ATaskLargerThanTheAgentStartsWhenNothingRuns) {
  Harness h;
  h.runToRunning();
  h.launch(1, /*cpus=*/8);  // the agent has 4: alone, it starts (nothing waits forever)
  EXPECT_EQ(h.executor.launchCount(1), 1u);
  h.launch(2);
  EXPECT_EQ(h.executor.launchCount(2), 0u);
  h.report(1, TaskState::kFinished);
  EXPECT_EQ(h.executor.launchCount(2), 1u);
}

TEST(BackendCoresTest, AKilledWaitingTaskIsReportedKilledAndNeverStarts) {
  Harness h;
  launchTasks(h, 6);
  h.kill(5, "not needed");
  ASSERT_EQ(h.statusUpdates().size(), 1u);
  EXPECT_EQ(h.statusUpdates()[0].task_id, 5u);
  EXPECT_EQ(h.statusUpdates()[0].state, TaskState::kKilled);
  EXPECT_EQ(h.statusUpdates()[0].reason, "not needed");
  EXPECT_TRUE(h.executor.kills.empty()) << "the executor never had it";
  h.report(2, TaskState::kFinished);
  EXPECT_EQ(h.executor.launchCount(5), 0u);
  EXPECT_EQ(h.executor.launchCount(6), 1u);
  EXPECT_EQ(h.backend.rememberedKills(), 0u);
}

TEST(BackendCoresTest, AWaitingTaskHasNoThreadDump) {
  Harness h;
  launchTasks(h, 5);
  h.deliverMessage(proto::TaskThreadDump{.task_id = 5}, /*id=*/77);
  const proto::Envelope& reply = h.lastSent();
  ASSERT_TRUE(reply.isReply());
  EXPECT_FALSE(reply.ok);
  ASSERT_TRUE(reply.error.has_value());
  EXPECT_EQ(reply.error->code, proto::error_code::kUnknownTask);
  EXPECT_NE(reply.error->message.find("waits for cores"), std::string::npos)
      << reply.error->message;
}

TEST(BackendCoresTest, TheSameTaskIdWhileItWaitsIsRefused) {
  Harness h;
  launchTasks(h, 5);
  h.launch(5);
  const proto::Envelope& error = h.lastSent();
  ASSERT_TRUE(error.error.has_value());
  EXPECT_EQ(error.error->code, proto::error_code::kUnexpectedMessage);
  EXPECT_EQ(h.backend.waitingTasks(), 1u);
}

TEST(BackendCoresTest, DecommissionAnswersTheWaitingTasksLostAndLetsTheRunningOnesFinish) {
  Harness h;
  launchTasks(h, 6);
  h.deliverMessage(proto::DecommissionExecutor{.reason = "scale down"});
  ASSERT_TRUE(h.backend.decommissioning());
  auto updates = h.statusUpdates();
  ASSERT_EQ(updates.size(), 2u);
  for (const auto& u : updates) {
    EXPECT_TRUE(u.task_id == 5 || u.task_id == 6) << u.task_id;
    EXPECT_EQ(u.state, TaskState::kLost);
    EXPECT_EQ(u.reason, std::string("executor ") + kExecutorId + " is decommissioning");
  }
  h.report(1, TaskState::kFinished);
  EXPECT_EQ(h.executor.launchCount(5), 0u);
  EXPECT_EQ(h.backend.runningTasks(), 3u);
}

TEST(BackendCoresTest, ExitAnswersTheWaitingTasksKilled) {
  Harness h;
  launchTasks(h, 6);
  h.backend.onStopRequested("received SIGTERM");
  std::vector<std::uint64_t> killed;
  for (const auto& u : h.statusUpdates()) {
    EXPECT_EQ(u.state, TaskState::kKilled);
    EXPECT_EQ(u.reason, "executor is stopping");
    killed.push_back(u.task_id);
  }
  EXPECT_EQ(killed, (std::vector<std::uint64_t>{5, 6}));
  // The running ones end as the executor stops them; none of the waiting ones starts.
  for (std::uint64_t id = 1; id <= 4; ++id) h.report(id, TaskState::kKilled, "executor stopped");
  EXPECT_EQ(h.executor.launchCount(5), 0u);
  EXPECT_EQ(h.executor.launchCount(6), 0u);
}

}  // namespace
}  // namespace dockhand::agent::backend_testing
