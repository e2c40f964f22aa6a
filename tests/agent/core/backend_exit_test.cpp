// Unit tests of the Backend's exit: the loss of the driver or worker, a local stop, and the
// single exit path (runs once, stops tasks, sends what it can, closes the link).
#include "backend_harness.h"

namespace dockhand::agent::backend_testing {
namespace {

// ---- Loss of the driver or worker, local stop ----------------------------------------------

TEST(BackendTest, DriverDisconnectWhileRunningExitsDriverLost) {
  Harness h;
  h.runToRunning();
  h.launch(1);
  // The link stays "connected" in the fake so that a RemoveExecutor would be visible.
  h.backend.onDriverDisconnected("connection reset by peer");
  h.timers.advance(Millis(0));
  EXPECT_EQ(h.exiter.codes, exitCodes({ExitCode::kDriverLost}));
  EXPECT_EQ(h.link.attemptedOfType("RemoveExecutor"), 0u);
  EXPECT_EQ(h.executor.stop_all_calls.size(), 1u);
}

TEST(BackendTest, DriverDisconnectWhileStoppingDoesNotExitAgain) {
  Harness h;
  h.runToRunning();
  h.deliverMessage(proto::StopExecutor{});
  h.backend.onDriverDisconnected("closed by driver");
  h.timers.advance(Millis(0));
  h.timers.advance(Millis(60000));
  EXPECT_EQ(h.exiter.codes, exitCodes({ExitCode::kSuccess}));
}

TEST(BackendTest, WorkerLostExitsWorkerLostWithRemoveExecutor) {
  Harness h;
  h.runToRunning();
  h.launch(1);
  h.backend.onWorkerLost("worker ws://worker-3:7078 closed the connection");
  auto removes = h.removeExecutors();
  ASSERT_EQ(removes.size(), 1u);
  EXPECT_EQ(removes[0].executor_id, kExecutorId);
  EXPECT_THAT(removes[0].reason, HasSubstr("worker-3"));
  h.timers.advance(Millis(0));
  EXPECT_EQ(h.exiter.codes, exitCodes({ExitCode::kWorkerLost}));
  EXPECT_EQ(h.executor.stop_all_calls.size(), 1u);
}

TEST(BackendTest, UnrecoverablePluginExitsTaskUnkillableNamingThePlugin) {
  Harness h;
  h.runToRunning();
  h.launch(1);
  h.backend.onPluginUnrecoverable("library", "task 1 did not return within kill_timeout_ms");
  auto removes = h.removeExecutors();
  ASSERT_EQ(removes.size(), 1u);
  EXPECT_EQ(removes[0].reason,
            "plugin 'library' cannot recover: task 1 did not return within kill_timeout_ms");
  h.timers.advance(Millis(0));
  EXPECT_EQ(h.exiter.codes, exitCodes({ExitCode::kTaskUnkillable}));
  EXPECT_EQ(toInt(ExitCode::kTaskUnkillable), 12);
  EXPECT_EQ(h.executor.stop_all_calls.size(), 1u);
}

TEST(BackendTest, WorkerLostWhileStoppingIsIgnored) {
  Harness h;
  h.runToRunning();
  h.backend.onStopRequested("SIGTERM");
  h.backend.onWorkerLost("worker gone");
  h.timers.advance(Millis(0));
  EXPECT_EQ(h.exiter.codes, exitCodes({ExitCode::kSuccess}));
  EXPECT_EQ(h.removeExecutors().size(), 1u);
}

TEST(BackendTest, StopRequestedExitsSuccessWithRemoveExecutor) {
  Harness h;
  h.runToRunning();
  h.launch(1);
  h.backend.onStopRequested("received SIGTERM");
  auto removes = h.removeExecutors();
  ASSERT_EQ(removes.size(), 1u);
  EXPECT_EQ(removes[0].executor_id, kExecutorId);
  EXPECT_EQ(removes[0].reason, "received SIGTERM");
  EXPECT_EQ(h.executor.stop_all_calls.size(), 1u);
  h.timers.advance(Millis(0));
  EXPECT_EQ(h.exiter.codes, exitCodes({ExitCode::kSuccess}));
}

// ---- The exit path -------------------------------------------------------------------------

TEST(BackendTest, ExitRunsOnceWithTheFirstCode) {
  Harness h;
  h.runToRunning();
  h.launch(1);
  h.backend.exitExecutor(ExitCode::kWorkerLost, "worker lost", /*notify_driver=*/true);
  h.backend.exitExecutor(ExitCode::kDriverLost, "driver lost", /*notify_driver=*/true);
  h.backend.exitExecutor(ExitCode::kSuccess, "stop", /*notify_driver=*/false);
  h.backend.onStopRequested("SIGINT");
  h.timers.advance(Millis(0));
  h.timers.advance(Millis(120000));
  EXPECT_EQ(h.exiter.codes, exitCodes({ExitCode::kWorkerLost}));
  EXPECT_EQ(h.executor.stop_all_calls.size(), 1u);
  EXPECT_EQ(h.removeExecutors().size(), 1u);
  EXPECT_EQ(h.link.close_calls, 1);
}

TEST(BackendTest, ExitHappensOnZeroDelayTimerAndClosesLink) {
  Harness h;
  h.runToRunning();
  h.backend.exitExecutor(ExitCode::kDriverLost, "test", /*notify_driver=*/false);
  EXPECT_EQ(h.backend.state(), State::kStopping);
  EXPECT_TRUE(h.exiter.codes.empty()) << "the exit must wait for queued events";
  EXPECT_EQ(h.link.close_calls, 0);
  h.timers.advance(Millis(0));
  EXPECT_EQ(h.exiter.codes, exitCodes({ExitCode::kDriverLost}));
  EXPECT_EQ(h.link.close_calls, 1);
  EXPECT_FALSE(h.link.is_connected);
}

TEST(BackendTest, LaunchWhileStoppingIsReportedKilled) {
  Harness h;
  h.runToRunning();
  h.backend.onStopRequested("SIGTERM");
  h.launch(5);
  EXPECT_TRUE(h.executor.launched.empty());
  auto updates = h.statusUpdates();
  ASSERT_EQ(updates.size(), 1u);
  EXPECT_EQ(updates[0].task_id, 5u);
  EXPECT_EQ(updates[0].state, TaskState::kKilled);
  h.timers.advance(Millis(0));
  EXPECT_EQ(h.exiter.codes, exitCodes({ExitCode::kSuccess}));
}

}  // namespace
}  // namespace dockhand::agent::backend_testing
