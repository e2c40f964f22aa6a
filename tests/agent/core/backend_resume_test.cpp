// Unit tests of the Backend's Reconnecting state (protocol.md 6.6): a registered agent whose
// connection drops keeps its tasks, connects again with back-off, resumes, and gets every
// final status to the driver exactly once; refused or out of time, it exits as before.
#include "backend_harness.h"

namespace dockhand::agent::backend_testing {
namespace {

BackendOptions resumingOptions() {
  BackendOptions o = testOptions();
  o.reconnect_timeout = Millis(10000);
  o.reconnect_delay = Millis(100);
  o.reconnect_max_delay = Millis(1000);
  o.held_blocks = [] {
    return std::vector<proto::BlockInfo>{
        {"shuffle_0_1_0", 42, "xxh64:00000000000000aa", kExecutorId, "http://n:7337/blocks/x"}};
  };
  return o;
}

struct ResumeHarness : Harness {
  ResumeHarness() : Harness(resumingOptions()) {}

  // The connection drops; the first try comes after reconnect_delay and gets through.
  void dropAndReconnect() {
    link.is_connected = false;
    backend.onDriverDisconnected("connection reset by peer");
    ASSERT_EQ(backend.state(), State::kReconnecting);
    const int before = link.connect_calls;
    timers.advance(Millis(100));
    ASSERT_EQ(link.connect_calls, before + 1);
    link.is_connected = true;
    backend.onDriverConnected();
  }
  proto::ResumeExecutor takeResume() {
    PendingAsk ask = link.takeAsk("ResumeExecutor");
    pending_resume = std::move(ask.done);
    return proto::decodeBody<proto::ResumeExecutor>(ask.message.body);
  }
  void acceptResume(std::vector<std::uint64_t> tasks) {
    pending_resume(okResult(proto::toJson(proto::ResumeAccepted{.tasks = std::move(tasks)})));
  }
  std::vector<proto::StatusUpdate> updatesFor(std::uint64_t task_id) const {
    std::vector<proto::StatusUpdate> out;
    for (const auto& u : statusUpdates()) {
      if (u.task_id == task_id) out.push_back(u);
    }
    return out;
  }
  AskCallback pending_resume;
};

TEST(BackendResumeTest, RegistersAsResumingOnlyWhenItReconnects) {
  ResumeHarness resuming;
  resuming.connect();
  resuming.answerAppConfig();
  auto reg = resuming.link.takeAsk("RegisterExecutor");
  EXPECT_TRUE(proto::decodeBody<proto::RegisterExecutor>(reg.message.body).resumes);

  Harness plain;  // reconnect_timeout 0
  plain.connect();
  plain.answerAppConfig();
  auto plain_reg = plain.link.takeAsk("RegisterExecutor");
  EXPECT_FALSE(proto::decodeBody<proto::RegisterExecutor>(plain_reg.message.body).resumes);
}

TEST(BackendResumeTest, ADroppedConnectionKeepsTheTasksAndResumes) {
  ResumeHarness h;
  h.runToRunning();
  h.launch(1);
  h.launch(2);
  h.dropAndReconnect();
  EXPECT_TRUE(h.executor.stop_all_calls.empty()) << "tasks go on while reconnecting";
  EXPECT_TRUE(h.exiter.codes.empty());
  EXPECT_EQ(h.link.attemptedOfType("RetrieveAppConfig"), 1u) << "no second bootstrap";
  EXPECT_EQ(h.link.attemptedOfType("RegisterExecutor"), 1u);

  const proto::ResumeExecutor resume = h.takeResume();
  EXPECT_EQ(resume.executor_id, kExecutorId);
  EXPECT_EQ(resume.running, (std::vector<std::uint64_t>{1, 2}));
  ASSERT_EQ(resume.blocks.size(), 1u);
  EXPECT_EQ(resume.blocks[0].id, "shuffle_0_1_0");
  h.acceptResume({1, 2});
  EXPECT_EQ(h.backend.state(), State::kRunning);
  EXPECT_EQ(h.backend.resumes(), 1u);

  // Heartbeats go on, and so do the tasks' statuses.
  const std::size_t beats = h.link.sentOfType("Heartbeat").size();
  h.timers.advance(h.backend.heartbeatInterval());
  EXPECT_EQ(h.link.sentOfType("Heartbeat").size(), beats + 1);
  h.report(1, TaskState::kFinished);
  ASSERT_EQ(h.updatesFor(1).size(), 1u);
  EXPECT_EQ(h.updatesFor(1)[0].state, TaskState::kFinished);
}

TEST(BackendResumeTest, AStatusOfTheTimeAwayIsSentOnceAfterTheResume) {
  ResumeHarness h;
  h.runToRunning();
  h.launch(1);
  h.link.is_connected = false;
  h.backend.onDriverDisconnected("connection reset by peer");
  h.report(1, TaskState::kFailed, "exit code 3");
  EXPECT_TRUE(h.updatesFor(1).empty());
  h.timers.advance(Millis(100));
  h.link.is_connected = true;
  h.backend.onDriverConnected();
  EXPECT_TRUE(h.updatesFor(1).empty()) << "nothing but the resume before the driver took it back";
  EXPECT_EQ(h.takeResume().running, (std::vector<std::uint64_t>{1}));
  h.acceptResume({1});
  ASSERT_EQ(h.updatesFor(1).size(), 1u);
  EXPECT_EQ(h.updatesFor(1)[0].state, TaskState::kFailed);
  EXPECT_EQ(h.updatesFor(1)[0].reason, "exit code 3");
}

TEST(BackendResumeTest, AFinalStatusTheDriverNeverGotIsSentAgainAndOnlyThat) {
  ResumeHarness h;
  h.runToRunning();
  h.launch(1);
  h.launch(2);
  h.report(1, TaskState::kFinished);  // written to the link; lost with the connection
  h.report(2, TaskState::kFinished);  // reached the driver
  ASSERT_EQ(h.statusUpdates().size(), 2u);
  EXPECT_EQ(h.backend.recentEnds(), 2u);
  h.dropAndReconnect();
  EXPECT_TRUE(h.takeResume().running.empty());
  h.acceptResume({1});
  ASSERT_EQ(h.updatesFor(1).size(), 2u) << "task 1's end again";
  EXPECT_EQ(h.updatesFor(1)[1].state, TaskState::kFinished);
  EXPECT_EQ(h.updatesFor(2).size(), 1u) << "the driver had task 2's end";
  EXPECT_EQ(h.backend.recentEnds(), 1u) << "only what was sent since is kept";
}

TEST(BackendResumeTest, ALaunchThatNeverArrivedIsReportedLost) {
  ResumeHarness h;
  h.runToRunning();
  h.launch(1);
  h.dropAndReconnect();
  h.takeResume();
  h.acceptResume({1, 7});
  ASSERT_EQ(h.updatesFor(7).size(), 1u);
  EXPECT_EQ(h.updatesFor(7)[0].state, TaskState::kLost);
  EXPECT_THAT(h.updatesFor(7)[0].reason, HasSubstr("never reached"));
  EXPECT_TRUE(h.updatesFor(1).empty()) << "task 1 still runs";
}

TEST(BackendResumeTest, ARefusedResumeStopsTheTasksAndExitsDriverLost) {
  for (std::string_view code :
       {proto::error_code::kNotResumable, proto::error_code::kUnknownType}) {
    ResumeHarness h;
    h.runToRunning();
    h.launch(1);
    h.dropAndReconnect();
    h.takeResume();
    h.pending_resume(errorResult(code, "executor exec-17 is not held"));
    h.timers.advance(Millis(0));
    EXPECT_EQ(h.exiter.codes, exitCodes({ExitCode::kDriverLost})) << code;
    EXPECT_EQ(h.executor.stop_all_calls.size(), 1u) << code;
    EXPECT_EQ(h.link.attemptedOfType("RemoveExecutor"), 0u) << code;
  }
}

TEST(BackendResumeTest, TriesWithBackOffThenGivesUpAfterTheTimeout) {
  ResumeHarness h;
  h.runToRunning();
  h.launch(1);
  h.link.is_connected = false;
  h.backend.onDriverDisconnected("connection reset by peer");
  std::vector<int> waits;
  for (int i = 0; i < 40 && h.exiter.codes.empty(); ++i) {
    const auto before = h.timers.now();
    const int calls = h.link.connect_calls;
    while (h.link.connect_calls == calls && h.exiter.codes.empty()) h.timers.advance(Millis(10));
    if (!h.exiter.codes.empty()) break;
    waits.push_back(
        static_cast<int>(std::chrono::duration_cast<Millis>(h.timers.now() - before).count()));
    h.backend.onDriverConnectFailed("Connection refused", true);
    h.timers.advance(Millis(0));
  }
  ASSERT_GE(waits.size(), 5u);
  EXPECT_EQ(waits[0], 100);
  EXPECT_EQ(waits[1], 200);
  EXPECT_EQ(waits[2], 400);
  EXPECT_EQ(waits[4], 1000) << "at most reconnect_max_delay";
  EXPECT_EQ(h.exiter.codes, exitCodes({ExitCode::kDriverLost}));
  EXPECT_EQ(h.executor.stop_all_calls.size(), 1u);
}

TEST(BackendResumeTest, ASilentDriverIsGivenUpAndReconnected) {
  ResumeHarness h;
  h.runToRunning();
  h.launch(1);
  h.timers.advance(h.backend.driverTimeout() + h.backend.heartbeatInterval());
  EXPECT_EQ(h.backend.state(), State::kReconnecting);
  EXPECT_GE(h.link.close_calls, 1);
  EXPECT_TRUE(h.exiter.codes.empty());
}

TEST(BackendResumeTest, ADecommissionSignalWhileReconnectingIsCarriedOutOnceResumed) {
  ResumeHarness h;
  h.runToRunning();
  h.link.is_connected = false;
  h.backend.onDriverDisconnected("connection reset by peer");
  h.backend.onDecommissionSignal();
  EXPECT_EQ(h.link.attemptedOfType("ExecutorDecommissioning"), 0u) << "no driver to tell yet";
  h.timers.advance(Millis(100));
  h.link.is_connected = true;
  h.backend.onDriverConnected();
  h.takeResume();
  h.acceptResume({});
  EXPECT_EQ(h.link.attemptedOfType("ExecutorDecommissioning"), 1u);
}

TEST(BackendResumeTest, WithoutResumingADroppedConnectionStillExits) {
  Harness h;
  h.runToRunning();
  h.launch(1);
  h.backend.onDriverDisconnected("connection reset by peer");
  h.timers.advance(Millis(0));
  EXPECT_EQ(h.exiter.codes, exitCodes({ExitCode::kDriverLost}));
}

}  // namespace
}  // namespace dockhand::agent::backend_testing
