// Unit tests of the Backend's tasks: launches and kills (kills that overtake their launch
// included), and the status updates that go to the driver in order, queued while they cannot
// be sent.
#include <cstdint>
#include <random>
#include <set>

#include "backend_harness.h"

namespace dockhand::agent::backend_testing {
namespace {

// `updates` are task `ended`'s final status, then task `running`'s RUNNING.
void expectEndThenRunning(const std::vector<proto::StatusUpdate>& updates, std::uint64_t ended,
                          TaskState end_state, std::uint64_t running) {
  ASSERT_EQ(updates.size(), 2u);
  EXPECT_EQ(updates[0].task_id, ended);
  EXPECT_EQ(updates[0].state, end_state);
  EXPECT_EQ(updates[1].task_id, running);
  EXPECT_EQ(updates[1].state, TaskState::kRunning);
}

// ---- Tasks ---------------------------------------------------------------------------------

TEST(BackendTest, LaunchTaskBeforeRegistrationIsProtocolViolation) {
  Harness h;
  h.connect();
  h.answerAppConfig();  // now registering
  h.launch(1);
  h.timers.advance(Millis(0));
  EXPECT_EQ(h.exiter.codes, exitCodes({ExitCode::kProtocolViolation}));
  EXPECT_TRUE(h.executor.launched.empty());
  auto removes = h.removeExecutors();
  ASSERT_EQ(removes.size(), 1u);
  EXPECT_EQ(removes[0].executor_id, kExecutorId);
  EXPECT_THAT(removes[0].reason, HasSubstr("LaunchTask before the executor was registered"));
}

TEST(BackendTest, KillTaskBeforeRegistrationIsProtocolViolation) {
  Harness h;
  h.connect();  // fetching the app config
  h.kill(1, "stage cancelled");
  h.timers.advance(Millis(0));
  EXPECT_EQ(h.exiter.codes, exitCodes({ExitCode::kProtocolViolation}));
  EXPECT_TRUE(h.executor.kills.empty());
  auto removes = h.removeExecutors();
  ASSERT_EQ(removes.size(), 1u);
  EXPECT_THAT(removes[0].reason, HasSubstr("KillTask before the executor was registered"));
}

TEST(BackendTest, LaunchTaskWhenRunningLaunchesOnExecutor) {
  Harness h;
  h.runToRunning();
  proto::LaunchTask msg;
  msg.task.task_id = 42;
  msg.task.attempt = 2;
  msg.task.name = "task 3.2 in stage 7.0";
  msg.task.runner = "container";
  msg.task.cpus = 2;
  msg.task.payload = Json{{"image", "busybox"}};
  h.deliverMessage(msg);

  ASSERT_EQ(h.executor.launched.size(), 1u);
  const proto::TaskDescription& task = h.executor.launched[0];
  EXPECT_EQ(task.task_id, 42u);
  EXPECT_EQ(task.attempt, 2);
  EXPECT_EQ(task.runner, "container");
  EXPECT_EQ(task.cpus, 2);
  EXPECT_EQ(task.payload, (Json{{"image", "busybox"}}));
  EXPECT_EQ(h.backend.runningTasks(), 1u);
  EXPECT_TRUE(h.statusUpdates().empty()) << "the runner reports RUNNING, not the backend";
}

TEST(BackendTest, LaunchErrorReportsFailedWithReason) {
  Harness h;
  h.runToRunning();
  h.executor.launch_errors[5] = "no runner named 'gpu-docker' is loaded";
  h.launch(5, /*cpus=*/3, {{"gpu", {"1"}}});

  auto updates = h.statusUpdates();
  ASSERT_EQ(updates.size(), 1u);
  EXPECT_EQ(updates[0].task_id, 5u);
  EXPECT_EQ(updates[0].executor_id, kExecutorId);
  EXPECT_EQ(updates[0].state, TaskState::kFailed);
  EXPECT_EQ(updates[0].reason, "no runner named 'gpu-docker' is loaded");
  EXPECT_EQ(updates[0].cpus, 3);
  EXPECT_EQ(updates[0].resources.at("gpu"), std::vector<std::string>{"1"});
  EXPECT_EQ(h.backend.runningTasks(), 0u);
  EXPECT_EQ(h.backend.lastTaskFinish(), h.timers.now());
  EXPECT_EQ(h.backend.state(), State::kRunning);
}

TEST(BackendTest, DuplicateRunningTaskIdIsRefusedWithoutSecondLaunch) {
  Harness h;
  h.runToRunning();
  h.launch(9);
  proto::LaunchTask again;
  again.task.task_id = 9;

  h.deliverMessage(again, /*id=*/31);
  const proto::Envelope& reply = h.lastSent();
  EXPECT_TRUE(reply.isReply());
  EXPECT_EQ(reply.re, 31u);
  EXPECT_FALSE(reply.ok);
  ASSERT_TRUE(reply.error.has_value());
  EXPECT_EQ(reply.error->code, proto::error_code::kUnexpectedMessage);
  EXPECT_THAT(reply.error->message, HasSubstr("9"));

  h.deliverMessage(again);
  EXPECT_TRUE(h.lastSent().isError());

  EXPECT_EQ(h.executor.launchCount(9), 1u);
  EXPECT_EQ(h.backend.runningTasks(), 1u);
  EXPECT_TRUE(h.statusUpdates().empty());
}

TEST(BackendTest, KillTaskForRunningTaskKillsOnExecutor) {
  Harness h;
  h.runToRunning();
  h.launch(11);
  h.launch(12);
  h.kill(11, "stage 4 cancelled", /*interrupt=*/true);
  h.kill(12, "", /*interrupt=*/false);

  ASSERT_EQ(h.executor.kills.size(), 2u);
  EXPECT_EQ(h.executor.kills[0].task_id, 11u);
  EXPECT_TRUE(h.executor.kills[0].interrupt);
  EXPECT_EQ(h.executor.kills[0].reason, "stage 4 cancelled");
  EXPECT_EQ(h.executor.kills[1].task_id, 12u);
  EXPECT_FALSE(h.executor.kills[1].interrupt);
  EXPECT_FALSE(h.executor.kills[1].reason.empty()) << "a kill without a reason still gets one";
  EXPECT_EQ(h.backend.rememberedKills(), 0u);
  EXPECT_EQ(h.backend.runningTasks(), 2u) << "a task ends when its runner says so";
}

TEST(BackendTest, KillBeforeLaunchStopsTheLaunchAndReportsKilled) {
  Harness h;
  h.runToRunning();
  h.kill(7, "another attempt finished first", /*interrupt=*/true);
  EXPECT_EQ(h.backend.rememberedKills(), 1u);
  EXPECT_TRUE(h.executor.kills.empty());

  h.launch(7, /*cpus=*/2);
  EXPECT_TRUE(h.executor.launched.empty());
  auto updates = h.statusUpdates();
  ASSERT_EQ(updates.size(), 1u);
  EXPECT_EQ(updates[0].task_id, 7u);
  EXPECT_EQ(updates[0].state, TaskState::kKilled);
  EXPECT_EQ(updates[0].reason, "another attempt finished first");
  EXPECT_EQ(updates[0].cpus, 2);
  EXPECT_EQ(h.backend.rememberedKills(), 0u);
  EXPECT_EQ(h.backend.runningTasks(), 0u);
}

TEST(BackendTest, RememberedKillIsHonouredUntilItExpires) {
  BackendOptions options = testOptions();
  options.kill_memory = Millis(1000);
  Harness h(options);
  h.runToRunning();
  h.kill(7, "cancelled");
  h.timers.advance(Millis(999));
  h.launch(7);
  EXPECT_TRUE(h.executor.launched.empty());
  ASSERT_EQ(h.statusUpdates().size(), 1u);
  EXPECT_EQ(h.statusUpdates()[0].state, TaskState::kKilled);
}

TEST(BackendTest, RememberedKillExpiresAfterKillMemory) {
  BackendOptions options = testOptions();
  options.kill_memory = Millis(1000);
  options.heartbeat_interval = Millis(30000);  // no heartbeat prunes in between
  Harness h(options);
  h.runToRunning();
  h.kill(7, "cancelled");
  h.timers.advance(Millis(1001));
  h.launch(7);
  EXPECT_EQ(h.executor.launchCount(7), 1u) << "an expired kill must not stop a later launch";
  EXPECT_TRUE(h.statusUpdates().empty());
  EXPECT_EQ(h.backend.runningTasks(), 1u);
  EXPECT_EQ(h.backend.rememberedKills(), 0u);
}

TEST(BackendTest, HeartbeatForgetsExpiredKills) {
  BackendOptions options = testOptions();
  options.kill_memory = Millis(1000);
  options.heartbeat_interval = Millis(500);
  Harness h(options);
  h.runToRunning();
  h.kill(7, "cancelled");
  h.kill(8, "cancelled");
  h.timers.advance(Millis(500));
  EXPECT_EQ(h.backend.rememberedKills(), 2u);
  h.timers.advance(Millis(1000));
  EXPECT_EQ(h.backend.rememberedKills(), 0u);
}

TEST(BackendTest, RememberedKillsAreBounded) {
  BackendOptions options = testOptions();
  options.max_remembered_kills = 3;
  Harness h(options);
  h.runToRunning();
  for (std::uint64_t id = 1; id <= 5; ++id) {
    h.kill(id, "cancelled " + std::to_string(id));
    h.timers.advance(Millis(1));
    EXPECT_LE(h.backend.rememberedKills(), 3u);
  }
  EXPECT_EQ(h.backend.rememberedKills(), 3u);

  // The oldest kills were forgotten: their launches run. The newest three still stop theirs.
  for (std::uint64_t id = 1; id <= 5; ++id) h.launch(id);
  EXPECT_EQ(h.executor.launchCount(1), 1u);
  EXPECT_EQ(h.executor.launchCount(2), 1u);
  std::set<std::uint64_t> killed;
  for (const auto& u : h.statusUpdates()) {
    EXPECT_EQ(u.state, TaskState::kKilled);
    EXPECT_EQ(u.reason, "cancelled " + std::to_string(u.task_id));
    killed.insert(u.task_id);
  }
  EXPECT_EQ(killed, (std::set<std::uint64_t>{3, 4, 5}));
}

TEST(BackendTest, KillLaunchStormLetsNoTaskEscapeItsKill) {
  constexpr std::uint64_t kTasks = 1000;
  BackendOptions options = testOptions();
  options.cores = static_cast<int>(kTasks);  // every task starts: none waits for cores
  Harness h(options);
  h.runToRunning();
  struct Event {
    std::uint64_t task_id = 0;
    bool launch = false;
  };
  std::vector<Event> events;
  for (std::uint64_t id = 1; id <= kTasks; ++id) {
    events.push_back(Event{id, true});
    events.push_back(Event{id, false});
  }
  std::mt19937 rng(20240601);
  std::shuffle(events.begin(), events.end(), rng);

  std::set<std::uint64_t> seen;
  std::set<std::uint64_t> kill_first;
  for (const Event& e : events) {
    if (seen.insert(e.task_id).second && !e.launch) kill_first.insert(e.task_id);
    if (e.launch) {
      h.launch(e.task_id);
    } else {
      h.kill(e.task_id, "storm kill " + std::to_string(e.task_id), /*interrupt=*/true);
    }
  }
  ASSERT_GT(kill_first.size(), kTasks / 10) << "the shuffle must exercise both orders";
  ASSERT_LT(kill_first.size(), kTasks - kTasks / 10);

  std::map<std::uint64_t, std::size_t> executor_kills;
  for (const KillCall& k : h.executor.kills) {
    ++executor_kills[k.task_id];
    EXPECT_TRUE(k.interrupt);
    EXPECT_EQ(k.reason, "storm kill " + std::to_string(k.task_id));
  }
  std::map<std::uint64_t, proto::StatusUpdate> reported;
  for (const auto& u : h.statusUpdates()) {
    EXPECT_TRUE(reported.emplace(u.task_id, u).second) << "task " << u.task_id << " twice";
  }
  for (std::uint64_t id = 1; id <= kTasks; ++id) {
    SCOPED_TRACE("task " + std::to_string(id));
    if (kill_first.count(id) != 0) {
      EXPECT_EQ(h.executor.launchCount(id), 0u) << "launched after its kill";
      ASSERT_EQ(reported.count(id), 1u);
      EXPECT_EQ(reported.at(id).state, TaskState::kKilled);
      EXPECT_EQ(reported.at(id).reason, "storm kill " + std::to_string(id));
    } else {
      EXPECT_EQ(h.executor.launchCount(id), 1u);
      EXPECT_EQ(executor_kills[id], 1u) << "launched task escaped its kill";
      EXPECT_EQ(reported.count(id), 0u);
    }
  }
  EXPECT_EQ(h.backend.rememberedKills(), 0u);
  EXPECT_EQ(h.backend.runningTasks(), kTasks - kill_first.size());

  // The runners report the kills; nothing is left running.
  for (std::uint64_t id = 1; id <= kTasks; ++id) {
    if (kill_first.count(id) == 0) h.report(id, TaskState::kKilled, "killed");
  }
  EXPECT_EQ(h.backend.runningTasks(), 0u);
  EXPECT_EQ(h.statusUpdates().size(), static_cast<std::size_t>(kTasks));
}

// ---- Status updates ------------------------------------------------------------------------

TEST(BackendTest, StatusUpdatesGoOutInOrderWithTaskCpusAndResources) {
  Harness h;
  h.runToRunning();
  h.launch(3, /*cpus=*/2, {{"gpu", {"0", "1"}}});

  h.report(3, TaskState::kRunning);
  EXPECT_EQ(h.backend.runningTasks(), 1u);
  EXPECT_FALSE(h.backend.lastTaskFinish().has_value());

  h.timers.advance(Millis(250));
  TaskStatusEvent done;
  done.task_id = 3;
  done.state = TaskState::kFinished;
  done.result = Json{{"rows", 1234}};
  h.backend.onTaskStatus(done);

  auto updates = h.statusUpdates();
  ASSERT_EQ(updates.size(), 2u);
  EXPECT_EQ(updates[0].state, TaskState::kRunning);
  EXPECT_EQ(updates[1].state, TaskState::kFinished);
  for (const auto& u : updates) {
    EXPECT_EQ(u.executor_id, kExecutorId);
    EXPECT_EQ(u.task_id, 3u);
    EXPECT_EQ(u.cpus, 2);
    EXPECT_EQ(u.resources.at("gpu"), (std::vector<std::string>{"0", "1"}));
  }
  EXPECT_EQ(updates[1].result, (Json{{"rows", 1234}}));
  EXPECT_EQ(h.backend.runningTasks(), 0u);
  EXPECT_EQ(h.backend.lastTaskFinish(), h.timers.now());
}

// hold_running (the agent's setting): RUNNING waits for the core thread to be idle, and a task
// that ends first is reported by its final status alone.
TEST(BackendTest, HeldRunningGoesWhenIdleAndIsSkippedWhenTheTaskEndsFirst) {
  metrics::Registry registry;
  BackendOptions options = testOptions();
  options.metrics = &registry;
  options.hold_running = true;
  options.running_hold = Millis(0);  // the hold's own test is below
  Harness h(options);
  h.runToRunning();
  h.launch(1, /*cpus=*/2);
  h.launch(2);
  h.report(1, TaskState::kRunning);
  h.report(2, TaskState::kRunning);
  EXPECT_TRUE(h.statusUpdates().empty()) << "held until the core thread is idle";

  h.report(2, TaskState::kFinished);  // ended before its RUNNING left
  h.backend.sendHeldStatuses();
  auto updates = h.statusUpdates();
  expectEndThenRunning(updates, 2, TaskState::kFinished, 1);
  ASSERT_EQ(updates.size(), 2u);
  EXPECT_EQ(updates[1].cpus, 2);

  h.backend.sendHeldStatuses();
  EXPECT_EQ(h.statusUpdates().size(), 2u) << "each RUNNING goes once";
  h.report(1, TaskState::kFinished);
  updates = h.statusUpdates();
  ASSERT_EQ(updates.size(), 3u);
  EXPECT_EQ(updates[2].state, TaskState::kFinished);
  EXPECT_EQ(registry.counter("dockhand_task_running_updates_skipped_total", "").get().value(), 1u);
  auto& latency =
      registry.histogram("dockhand_task_launch_latency_seconds", "", {}, metrics::latencyBuckets())
          .get();
  EXPECT_EQ(latency.count(), 2u) << "a skipped RUNNING still times its launch";
}

// running_hold: a RUNNING waits that long after its report, past the idle moment, so that a task
// that ends within it costs one StatusUpdate; a timer sends it once due, and none is left armed.
TEST(BackendTest, HeldRunningWaitsItsHoldThenGoesOnATimer) {
  BackendOptions options = testOptions();
  options.hold_running = true;
  options.running_hold = Millis(2);
  Harness h(options);
  h.runToRunning();
  h.launch(1);
  h.launch(2);
  h.report(1, TaskState::kRunning);
  h.timers.advance(Millis(1));
  h.report(2, TaskState::kRunning);
  h.backend.sendHeldStatuses();  // idle, but neither is due
  EXPECT_TRUE(h.statusUpdates().empty());

  h.report(2, TaskState::kFinished);  // within its hold: its RUNNING is skipped
  h.backend.sendHeldStatuses();
  h.timers.advance(Millis(1));  // task 1's hold is over: the timer sends it
  expectEndThenRunning(h.statusUpdates(), 2, TaskState::kFinished, 1);

  const std::size_t armed = h.timers.pending();
  h.backend.sendHeldStatuses();
  h.timers.advance(Millis(10));
  EXPECT_EQ(h.statusUpdates().size(), 2u) << "each RUNNING goes once";
  EXPECT_LE(h.timers.pending(), armed) << "no timer armed while no RUNNING waits";
}

TEST(BackendTest, FailedStatusCarriesExitCodeSignalAndStderr) {
  Harness h;
  h.runToRunning();
  h.launch(4);
  TaskStatusEvent failed;
  failed.task_id = 4;
  failed.state = TaskState::kFailed;
  failed.reason = "process killed by signal 9";
  failed.exit_code = 137;
  failed.signal = 9;
  failed.stderr_tail = "Killed\n";
  h.backend.onTaskStatus(failed);

  auto updates = h.statusUpdates();
  ASSERT_EQ(updates.size(), 1u);
  EXPECT_EQ(updates[0].state, TaskState::kFailed);
  EXPECT_EQ(updates[0].reason, "process killed by signal 9");
  EXPECT_EQ(updates[0].exit_code, 137);
  EXPECT_EQ(updates[0].signal, 9);
  EXPECT_EQ(updates[0].stderr_tail, "Killed\n");
  EXPECT_EQ(h.backend.runningTasks(), 0u);
  h.report(4, TaskState::kFinished);
  EXPECT_EQ(h.statusUpdates().size(), 1u) << "a task ends once";
}

TEST(BackendTest, StatusCarriesTheTasksLogUrlsWhenTheyAreServed) {
  BackendOptions options = testOptions();
  options.task_log_url = "http://node-7:7337/v1/tasks/{task_id}/logs/{stream}";
  Harness h(options);
  h.runToRunning();
  h.launch(18446744073709551615ULL);
  h.report(18446744073709551615ULL, TaskState::kFinished);
  auto updates = h.statusUpdates();
  ASSERT_EQ(updates.size(), 1u);
  EXPECT_EQ(updates[0].log_urls.at("stdout"),
            "http://node-7:7337/v1/tasks/18446744073709551615/logs/stdout");
  EXPECT_EQ(updates[0].log_urls.at("stderr"),
            "http://node-7:7337/v1/tasks/18446744073709551615/logs/stderr");

  Harness without;  // no task_log_url: no log_urls
  without.runToRunning();
  without.launch(3);
  without.report(3, TaskState::kFinished);
  ASSERT_EQ(without.statusUpdates().size(), 1u);
  EXPECT_TRUE(without.statusUpdates()[0].log_urls.empty());
}

TEST(BackendTest, StatusForUnknownTaskIsIgnored) {
  Harness h;
  h.runToRunning();
  h.report(99, TaskState::kFinished);
  h.report(99, TaskState::kRunning);
  EXPECT_TRUE(h.statusUpdates().empty());
  EXPECT_FALSE(h.backend.lastTaskFinish().has_value());
  EXPECT_EQ(h.backend.state(), State::kRunning);
}

TEST(BackendTest, StatusUpdatesQueueWhileSendFailsAndFlushInOrderOnHeartbeat) {
  Harness h;
  h.runToRunning();
  for (std::uint64_t id = 1; id <= 4; ++id) h.launch(id);

  h.link.send_ok = false;
  h.report(1, TaskState::kFinished);
  EXPECT_EQ(h.backend.queuedStatusUpdates(), 1u);
  h.timers.advance(h.backend.heartbeatInterval());  // still failing: nothing is lost
  EXPECT_EQ(h.backend.queuedStatusUpdates(), 1u);

  h.link.send_ok = true;
  h.report(2, TaskState::kFailed, "exit code 1");
  h.report(3, TaskState::kRunning);
  EXPECT_EQ(h.backend.queuedStatusUpdates(), 3u) << "later updates must queue behind earlier ones";
  EXPECT_TRUE(h.statusUpdates().empty());

  h.timers.advance(h.backend.heartbeatInterval());
  EXPECT_EQ(h.backend.queuedStatusUpdates(), 0u);
  h.report(4, TaskState::kFinished);
  auto updates = h.statusUpdates();
  ASSERT_EQ(updates.size(), 4u);
  EXPECT_EQ(updates[0].task_id, 1u);
  EXPECT_EQ(updates[1].task_id, 2u);
  EXPECT_EQ(updates[1].reason, "exit code 1");
  EXPECT_EQ(updates[2].task_id, 3u);
  EXPECT_EQ(updates[3].task_id, 4u);
}

TEST(BackendTest, StatusUpdatesQueueWhileLinkIsDown) {
  Harness h;
  h.runToRunning();
  h.launch(1);
  h.launch(2);
  h.link.is_connected = false;
  h.report(1, TaskState::kFinished);
  h.report(2, TaskState::kFinished);
  EXPECT_EQ(h.backend.queuedStatusUpdates(), 2u);
  EXPECT_EQ(h.link.attemptedOfType("StatusUpdate"), 0u) << "nothing is sent while down";

  h.link.is_connected = true;
  h.timers.advance(h.backend.heartbeatInterval());
  auto updates = h.statusUpdates();
  ASSERT_EQ(updates.size(), 2u);
  EXPECT_EQ(updates[0].task_id, 1u);
  EXPECT_EQ(updates[1].task_id, 2u);
}

TEST(BackendTest, UndeliverableStatusUpdatesAreReportedOnExit) {
  Harness h;
  LogCapture log;
  h.runToRunning();
  h.launch(21);
  h.launch(22);
  h.link.send_ok = false;
  h.report(21, TaskState::kFinished);
  h.report(22, TaskState::kKilled, "cancelled");
  h.backend.onStopRequested("SIGTERM");
  EXPECT_EQ(h.backend.queuedStatusUpdates(), 2u);

  h.timers.advance(Millis(0));
  EXPECT_EQ(h.exiter.codes, exitCodes({ExitCode::kSuccess}));
  EXPECT_EQ(h.backend.queuedStatusUpdates(), 2u);
  EXPECT_THAT(log.text(), HasSubstr("2 status update(s) could not be delivered"));
  EXPECT_THAT(log.text(), HasSubstr("21, 22"));
}

TEST(BackendTest, QueuedStatusUpdatesAreFlushedBeforeTheLinkCloses) {
  Harness h;
  h.runToRunning();
  h.launch(1);
  h.link.send_ok = false;
  h.report(1, TaskState::kFinished);
  h.link.send_ok = true;
  h.deliverMessage(proto::StopExecutor{});
  h.timers.advance(Millis(0));
  EXPECT_EQ(h.backend.queuedStatusUpdates(), 0u);
  ASSERT_EQ(h.statusUpdates().size(), 1u);
  EXPECT_EQ(h.link.close_calls, 1);
}

TEST(BackendTest, StatusesOfStoppedTasksAreSentBeforeExit) {
  Harness h;
  h.runToRunning();
  h.launch(1);
  h.deliverMessage(proto::StopExecutor{});
  ASSERT_EQ(h.executor.stop_all_calls.size(), 1u);
  // The stopped task's status arrives as an event queued behind the stop.
  h.report(1, TaskState::kKilled, "executor stopping");
  EXPECT_TRUE(h.exiter.codes.empty());
  h.timers.advance(Millis(0));
  ASSERT_EQ(h.statusUpdates().size(), 1u);
  EXPECT_EQ(h.statusUpdates()[0].state, TaskState::kKilled);
  EXPECT_EQ(h.exiter.codes, exitCodes({ExitCode::kSuccess}));
}

TEST(BackendTest, FinishedTaskBlocksAreAnnouncedBeforeItsStatus) {
  Harness h;
  h.runToRunning();
  h.launch(4);
  TaskStatusEvent done;
  done.task_id = 4;
  done.state = TaskState::kFinished;
  done.blocks = {blockAt("task_4_result", kExecutorId)};
  h.backend.onTaskStatus(done);
  ASSERT_GE(h.link.sent.size(), 2u);
  const auto& info = h.link.sent[h.link.sent.size() - 2];
  EXPECT_EQ(info.type, "UpdateBlockInfo");
  EXPECT_EQ(proto::decodeBody<proto::UpdateBlockInfo>(info.body).added.at(0).id, "task_4_result");
  EXPECT_EQ(h.lastSent().type, "StatusUpdate");
}

}  // namespace
}  // namespace dockhand::agent::backend_testing

namespace dockhand::agent::backend_testing {
namespace {

// The task counters of GET /metrics: every accepted launch is started, every final status
// sent is ended by its state, and times run by the Backend's clock.
TEST(BackendTest, CountsTasksStartedAndEndedAndTimesThem) {
  metrics::Registry registry;
  BackendOptions options = testOptions();
  options.metrics = &registry;
  Harness h(options);
  h.runToRunning();
  h.launch(1);
  h.launch(2);
  h.executor.launch_errors[3] = "no such runner";
  h.launch(3);  // refused by the executor: started, then FAILED at once
  h.timers.advance(Millis(250));
  h.report(1, TaskState::kRunning);
  h.timers.advance(Millis(1750));
  h.report(1, TaskState::kFinished);
  h.report(2, TaskState::kKilled, "killed by the driver");

  auto& ended = registry.counter("dockhand_tasks_ended_total", "", {"state"});
  EXPECT_EQ(registry.counter("dockhand_tasks_started_total", "").get().value(), 3u);
  EXPECT_EQ(ended.labels({"FINISHED"}).value(), 1u);
  EXPECT_EQ(ended.labels({"KILLED"}).value(), 1u);
  EXPECT_EQ(ended.labels({"FAILED"}).value(), 1u);
  EXPECT_EQ(ended.labels({"LOST"}).value(), 0u);
  auto& duration =
      registry.histogram("dockhand_task_duration_seconds", "", {}, metrics::durationBuckets())
          .get();
  EXPECT_EQ(duration.count(), 3u);
  EXPECT_DOUBLE_EQ(duration.sum(), 2.0 + 2.0 + 0.0);
  auto& latency =
      registry.histogram("dockhand_task_launch_latency_seconds", "", {}, metrics::latencyBuckets())
          .get();
  EXPECT_EQ(latency.count(), 1u);
  EXPECT_DOUBLE_EQ(latency.sum(), 0.25);
}

}  // namespace
}  // namespace dockhand::agent::backend_testing
