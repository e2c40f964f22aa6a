// Unit tests of decommission as the Backend runs it: the Backend delegates to DecommissionFlow
// (tested phase by phase in decommission_flow_test.cpp); these check the wiring end to end
// through the Backend's events, its LOST answers to launches, and the heartbeat's progress.
#include "backend_harness.h"

namespace dockhand::agent::backend_testing {
namespace {

BackendOptions decommissionOptions() {
  BackendOptions o = testOptions();
  o.decommission.check_interval = Millis(1000);
  return o;
}

void answerPeers(Harness& h) {
  h.link.takeAsk("GetPeers")
      .done(okResult(proto::toJson(std::vector<proto::Peer>{{"exec-2", "http://peer:1"}})));
}

TEST(BackendDecommissionTest, SignalAsksTheDriverThenDecommissions) {
  Harness h(decommissionOptions());
  h.runToRunning();
  h.backend.onDecommissionSignal();
  EXPECT_FALSE(h.backend.decommissioning()) << "not before the driver answered";
  PendingAsk ask = h.link.takeAsk("ExecutorDecommissioning");
  EXPECT_EQ(proto::decodeBody<proto::ExecutorDecommissioning>(ask.message.body).executor_id,
            kExecutorId);
  ask.done(okResult(Json{{"accepted", true}}));
  EXPECT_TRUE(h.backend.decommissioning());
  EXPECT_EQ(h.decommissioner.begins, 1);
  PendingAsk peers = h.link.takeAsk("GetPeers");
  EXPECT_EQ(proto::decodeBody<proto::GetPeers>(peers.message.body).executor_id, kExecutorId);
}

TEST(BackendDecommissionTest, DriverThatDoesNotAcceptLeavesTheAgentRunning) {
  Harness h(decommissionOptions());
  h.runToRunning();
  h.backend.onDecommissionSignal();
  h.link.takeAsk("ExecutorDecommissioning").done(okResult(Json{{"accepted", false}}));
  EXPECT_FALSE(h.backend.decommissioning());
  h.launch(3);
  EXPECT_EQ(h.executor.launchCount(3), 1u);
}

TEST(BackendDecommissionTest, LaunchTaskWhileDecommissioningIsLostNotStarted) {
  Harness h(decommissionOptions());
  h.runToRunning();
  h.deliverMessage(proto::DecommissionExecutor{.reason = "scale down"});
  ASSERT_TRUE(h.backend.decommissioning());
  h.launch(5);
  EXPECT_EQ(h.executor.launchCount(5), 0u);
  auto updates = h.statusUpdates();
  ASSERT_EQ(updates.size(), 1u);
  EXPECT_EQ(updates[0].task_id, 5u);
  EXPECT_EQ(updates[0].state, TaskState::kLost);
  EXPECT_EQ(updates[0].reason, "executor exec-17 is decommissioning");
}

TEST(BackendDecommissionTest, WaitsForRunningTasksThenExitsZeroAfterACompletePass) {
  Harness h(decommissionOptions());
  h.runToRunning();
  h.launch(1);
  h.deliverMessage(proto::DecommissionExecutor{});
  answerPeers(h);
  ASSERT_EQ(h.decommissioner.passes.size(), 1u);
  EXPECT_EQ(h.decommissioner.passes[0].peers.size(), 1u);
  // The first pass ends while the task still runs: no exit, however long.
  h.decommissioner.finishPass(completePass());
  h.timers.advance(Millis(5000));
  EXPECT_TRUE(h.exiter.codes.empty());
  EXPECT_EQ(h.backend.state(), State::kRunning);

  h.report(1, TaskState::kFinished);
  h.timers.advance(Millis(1000));
  EXPECT_TRUE(h.exiter.codes.empty()) << "the last pass started before the task finished";
  answerPeers(h);
  ASSERT_EQ(h.decommissioner.passes.size(), 1u);
  h.decommissioner.finishPass(completePass());
  h.timers.advance(Millis(1000));
  h.timers.advance(Millis(0));
  EXPECT_EQ(h.exiter.codes, exitCodes({ExitCode::kSuccess}));
  auto removes = h.removeExecutors();
  ASSERT_EQ(removes.size(), 1u);
  EXPECT_EQ(removes[0].reason, "decommission finished");
}

TEST(BackendDecommissionTest, TaskFinishingDuringAPassForcesAnotherPass) {
  Harness h(decommissionOptions());
  h.runToRunning();
  h.launch(1);
  h.deliverMessage(proto::DecommissionExecutor{});
  answerPeers(h);
  // The task finishes (leaving a block) while pass 1 runs; pass 1 then reports complete.
  TaskStatusEvent done;
  done.task_id = 1;
  done.state = TaskState::kFinished;
  done.blocks = {blockAt("shuffle_0_1_0", kExecutorId)};
  h.backend.onTaskStatus(done);
  h.decommissioner.finishPass(completePass({blockAt("shuffle_0_0_0", "exec-2")}));
  EXPECT_EQ(h.decommissioner.released, std::vector<std::string>{"shuffle_0_0_0"});

  h.timers.advance(Millis(1000));
  EXPECT_TRUE(h.exiter.codes.empty()) << "pass 1 started before the task finished";
  answerPeers(h);
  ASSERT_EQ(h.decommissioner.passes.size(), 1u) << "a second pass starts";
  h.decommissioner.finishPass(completePass({blockAt("shuffle_0_1_0", "exec-2")}));
  h.timers.advance(Millis(1000));
  h.timers.advance(Millis(0));
  EXPECT_EQ(h.exiter.codes, exitCodes({ExitCode::kSuccess}));
  EXPECT_EQ(h.decommissioner.released,
            (std::vector<std::string>{"shuffle_0_0_0", "shuffle_0_1_0"}));
}

TEST(BackendDecommissionTest, MovedBlocksAreReportedBeforeTheirLocalCopiesGo) {
  Harness h(decommissionOptions());
  h.runToRunning();
  h.deliverMessage(proto::DecommissionExecutor{});
  answerPeers(h);
  h.decommissioner.finishPass(
      completePass({blockAt("rdd_2_0", "exec-2"), blockAt("task_9_out", "")}));
  auto infos = h.link.sentOfType("UpdateBlockInfo");
  ASSERT_EQ(infos.size(), 1u);
  auto info = proto::decodeBody<proto::UpdateBlockInfo>(infos[0].body);
  EXPECT_EQ(info.executor_id, kExecutorId);
  ASSERT_EQ(info.added.size(), 2u);
  EXPECT_EQ(info.added[0].executor_id, "exec-2");
  EXPECT_EQ(info.added[1].executor_id, "");
  EXPECT_EQ(info.removed, (std::vector<std::string>{"rdd_2_0", "task_9_out"}));
  EXPECT_EQ(h.decommissioner.released.size(), 2u);
}

TEST(BackendDecommissionTest, IncompletePassIsRetriedUntilComplete) {
  Harness h(decommissionOptions());
  h.runToRunning();
  h.deliverMessage(proto::DecommissionExecutor{});
  answerPeers(h);
  MigrationPassResult partial;
  partial.failed = {{"rdd_1_1", "peer: HTTP 507"}};
  partial.blocks_left = 1;
  partial.bytes_left = 10;
  h.decommissioner.finishPass(partial);
  h.timers.advance(Millis(1000));
  EXPECT_TRUE(h.exiter.codes.empty());
  EXPECT_EQ(h.backend.decommissionProgress()["blocks_failed"], 1);
  answerPeers(h);
  h.decommissioner.finishPass(completePass({blockAt("rdd_1_1", "")}));
  h.timers.advance(Millis(1000));
  h.timers.advance(Millis(0));
  EXPECT_EQ(h.exiter.codes, exitCodes({ExitCode::kSuccess}));
}

TEST(BackendDecommissionTest, WithoutMigrationExitsOnceNoTaskRuns) {
  Harness h(decommissionOptions());
  h.decommissioner.migration_enabled = false;
  h.runToRunning();
  h.launch(1);
  h.deliverMessage(proto::DecommissionExecutor{});
  EXPECT_EQ(h.link.attemptedOfType("GetPeers"), 0u);
  h.timers.advance(Millis(3000));
  EXPECT_TRUE(h.exiter.codes.empty());
  h.report(1, TaskState::kFinished);
  h.timers.advance(Millis(1000));
  h.timers.advance(Millis(0));
  EXPECT_EQ(h.exiter.codes, exitCodes({ExitCode::kSuccess}));
  EXPECT_TRUE(h.decommissioner.passes.empty());
}

TEST(BackendDecommissionTest, DisabledOnlyWarns) {
  BackendOptions options = decommissionOptions();
  options.decommission.enabled = false;
  Harness h(options);
  LogCapture log;
  h.runToRunning();
  h.backend.onDecommissionSignal();
  h.deliverMessage(proto::DecommissionExecutor{});
  EXPECT_FALSE(h.backend.decommissioning());
  EXPECT_EQ(h.link.attemptedOfType("ExecutorDecommissioning"), 0u);
  EXPECT_EQ(h.decommissioner.begins, 0);
  EXPECT_THAT(log.text(), HasSubstr("decommission is disabled"));
  h.launch(2);
  EXPECT_EQ(h.executor.launchCount(2), 1u);
  h.timers.advance(Millis(30000));
  EXPECT_TRUE(h.exiter.codes.empty());
}

TEST(BackendDecommissionTest, SecondTriggerOnlyWarns) {
  Harness h(decommissionOptions());
  LogCapture log;
  h.runToRunning();
  h.backend.onDecommissionSignal();
  h.backend.onDecommissionSignal();  // while the first ask is pending
  EXPECT_EQ(h.link.attemptedOfType("ExecutorDecommissioning"), 1u);
  h.link.takeAsk("ExecutorDecommissioning").done(okResult(Json{{"accepted", true}}));
  h.backend.onDecommissionSignal();
  h.deliverMessage(proto::DecommissionExecutor{});
  EXPECT_EQ(h.link.attemptedOfType("ExecutorDecommissioning"), 1u);
  EXPECT_EQ(h.decommissioner.begins, 1);
  EXPECT_EQ(h.link.attemptedOfType("GetPeers"), 1u);
  EXPECT_THAT(log.text(), HasSubstr("already started decommissioning"));
}

TEST(BackendDecommissionTest, DeadlineExitsIncompleteNamingEveryBlockLeft) {
  BackendOptions options = decommissionOptions();
  options.decommission.deadline = Millis(5000);
  Harness h(options);
  LogCapture log;
  h.runToRunning();
  h.deliverMessage(proto::DecommissionExecutor{});
  answerPeers(h);
  h.decommissioner.left = {"rdd_7_1", "shuffle_3_0_2"};
  MigrationPassResult failed;
  failed.failed = {{"rdd_7_1", "no peers"}, {"shuffle_3_0_2", "no peers"}};
  failed.blocks_left = 2;
  h.decommissioner.finishPass(failed);
  h.timers.advance(Millis(4999));
  EXPECT_TRUE(h.exiter.codes.empty());
  h.timers.advance(Millis(1));
  h.timers.advance(Millis(0));
  EXPECT_EQ(h.exiter.codes, exitCodes({ExitCode::kDecommissionIncomplete}));
  EXPECT_THAT(log.text(), HasSubstr("rdd_7_1"));
  EXPECT_THAT(log.text(), HasSubstr("shuffle_3_0_2"));
  auto removes = h.removeExecutors();
  ASSERT_EQ(removes.size(), 1u);
  EXPECT_THAT(removes[0].reason, HasSubstr("deadline"));
}

TEST(BackendDecommissionTest, HeartbeatCarriesDecommissionProgress) {
  Harness h(decommissionOptions());
  h.runToRunning();
  h.timers.advance(h.backend.heartbeatInterval());
  auto beats = h.link.sentOfType("Heartbeat");
  ASSERT_FALSE(beats.empty());
  EXPECT_TRUE(proto::decodeBody<proto::Heartbeat>(beats.back().body).decommission.is_null());
  h.launch(1);
  h.deliverMessage(proto::DecommissionExecutor{});
  answerPeers(h);
  h.decommissioner.finishPass(completePass({blockAt("rdd_1_0", "exec-2", 4096)}));
  h.timers.advance(h.backend.heartbeatInterval());
  beats = h.link.sentOfType("Heartbeat");
  auto progress = proto::decodeBody<proto::Heartbeat>(beats.back().body).decommission;
  ASSERT_TRUE(progress.is_object());
  EXPECT_EQ(progress["state"], "waiting-for-tasks");
  EXPECT_EQ(progress["blocks_migrated"], 1);
  EXPECT_EQ(progress["bytes_migrated"], 4096);
}

TEST(BackendDecommissionTest, ProgressOfARunningPassShowsBlockByBlock) {
  Harness h(decommissionOptions());
  h.runToRunning();
  h.deliverMessage(proto::DecommissionExecutor{});
  answerPeers(h);
  ASSERT_EQ(h.decommissioner.passes.size(), 1u);
  auto progress = [&] {
    h.timers.advance(h.backend.heartbeatInterval());
    auto beats = h.link.sentOfType("Heartbeat");
    return proto::decodeBody<proto::Heartbeat>(beats.back().body).decommission;
  };
  h.decommissioner.passes.front().progress(MigrationPassProgress{4, 4000, 0, 0});
  auto at_start = progress();
  EXPECT_EQ(at_start["state"], "migrating");
  EXPECT_EQ(at_start["blocks_total"], 4);
  EXPECT_EQ(at_start["blocks_left"], 4);
  EXPECT_EQ(at_start["blocks_migrated"], 0);
  h.decommissioner.passes.front().progress(MigrationPassProgress{4, 4000, 3, 2500});
  auto later = progress();
  EXPECT_EQ(later["blocks_migrated"], 3);
  EXPECT_EQ(later["bytes_migrated"], 2500);
  EXPECT_EQ(later["blocks_left"], 1);
  EXPECT_EQ(later["bytes_left"], 1500);
  EXPECT_EQ(h.backend.statusJson()["decommission"]["blocks_migrated"], 3);

  // The pass's result replaces its running count; a late report changes nothing.
  auto report = h.decommissioner.passes.front().progress;
  MigrationPassResult result;
  result.moved = {blockAt("rdd_1_0", "exec-2", 1000), blockAt("rdd_1_1", "exec-2", 1000),
                  blockAt("rdd_1_2", "exec-2", 500)};
  result.bytes_moved = 2500;
  result.failed = {{"rdd_1_3", "HTTP 507"}};
  result.blocks_left = 1;
  result.bytes_left = 1500;
  h.decommissioner.finishPass(result);
  report(MigrationPassProgress{4, 4000, 4, 4000});
  auto after = progress();
  EXPECT_EQ(after["blocks_migrated"], 3);
  EXPECT_EQ(after["blocks_failed"], 1);
  EXPECT_EQ(after["blocks_left"], 1);
  EXPECT_EQ(after["bytes_left"], 1500);
}

}  // namespace
}  // namespace dockhand::agent::backend_testing
