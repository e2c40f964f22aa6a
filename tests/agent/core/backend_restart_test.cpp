// Unit tests of the Backend across its own restart: a restart in place (SIGUSR2) stops the
// tasks, reports them LOST and leaves without RemoveExecutor; the next process, told that the
// work directory holds this executor's session (resume_after_restart), resumes it after the
// app config instead of registering, and reports LOST every task the driver counted there. A
// refused resume is followed by a registration on a new connection.
#include "backend_harness.h"

namespace dockhand::agent::backend_testing {
namespace {

BackendOptions restartedOptions() {
  BackendOptions o = testOptions();
  o.reconnect_timeout = Millis(10000);
  o.resume_after_restart = true;
  o.held_blocks = [] {
    return std::vector<proto::BlockInfo>{
        {"shuffle_0_1_0", 42, "xxh64:00000000000000aa", kExecutorId, "http://n:7338/blocks/x"}};
  };
  return o;
}

std::vector<proto::StatusUpdate> updatesFor(const Harness& h, std::uint64_t task_id) {
  std::vector<proto::StatusUpdate> out;
  for (const auto& u : h.statusUpdates()) {
    if (u.task_id == task_id) out.push_back(u);
  }
  return out;
}

// A Backend started on a work directory that holds its session, up to its resume.
struct Restarted {
  Restarted() : h(options()) {
    h.connect();
    h.answerAppConfig();
  }
  BackendOptions options() {
    BackendOptions o = restartedOptions();
    o.on_resume_refused = [this] { ++refused; };
    return o;
  }
  int refused = 0;
  Harness h;
};

TEST(BackendRestartTest, ARestartedAgentResumesWithItsBlocksInsteadOfRegistering) {
  Restarted r;
  Harness& h = r.h;
  int& refused = r.refused;
  EXPECT_EQ(h.link.attemptedOfType("RegisterExecutor"), 0u);
  PendingAsk ask = h.link.takeAsk("ResumeExecutor");
  const auto resume = proto::decodeBody<proto::ResumeExecutor>(ask.message.body);
  EXPECT_EQ(resume.executor_id, kExecutorId);
  EXPECT_TRUE(resume.running.empty()) << "no task survived the old process";
  ASSERT_EQ(resume.blocks.size(), 1u);
  EXPECT_EQ(resume.blocks[0].url, "http://n:7338/blocks/x");

  ask.done(okResult(proto::toJson(proto::ResumeAccepted{{4, 9}})));
  EXPECT_EQ(h.backend.state(), State::kRunning);
  EXPECT_EQ(h.backend.resumes(), 1u);
  EXPECT_EQ(refused, 0);
  for (std::uint64_t task : {4, 9}) {
    const auto updates = updatesFor(h, task);
    ASSERT_EQ(updates.size(), 1u) << task;
    EXPECT_EQ(updates[0].state, TaskState::kLost);
    EXPECT_THAT(updates[0].reason, HasSubstr("restarted"));
  }
  EXPECT_EQ(h.link.attemptedOfType("LaunchedExecutor"), 0u) << "the driver has it active";
  const std::size_t beats = h.link.sentOfType("Heartbeat").size();
  h.timers.advance(h.backend.heartbeatInterval());
  EXPECT_EQ(h.link.sentOfType("Heartbeat").size(), beats + 1);
  h.launch(10);
  EXPECT_EQ(h.executor.launched.size(), 1u) << "it takes tasks as after a registration";
}

TEST(BackendRestartTest, ARefusedResumeAfterARestartRegistersAnewOnANewConnection) {
  Restarted r;
  Harness& h = r.h;
  const int& refused = r.refused;
  const int connects = h.link.connect_calls;
  h.link.takeAsk("ResumeExecutor")
      .done(errorResult(proto::error_code::kNotResumable, "executor exec-17 is not held"));
  EXPECT_EQ(refused, 1);
  EXPECT_EQ(h.link.close_calls, 1) << "the driver closes the refused connection; so does the agent";
  EXPECT_EQ(h.link.connect_calls, connects + 1);
  EXPECT_TRUE(h.exiter.codes.empty());
  EXPECT_EQ(h.backend.state(), State::kConnecting);

  h.link.is_connected = true;
  h.backend.onDriverConnected();
  h.answerAppConfig();
  h.acceptRegistration();
  EXPECT_EQ(h.backend.state(), State::kRunning);
  EXPECT_EQ(h.link.attemptedOfType("ResumeExecutor"), 1u) << "tried once";
  EXPECT_EQ(h.link.attemptedOfType("LaunchedExecutor"), 1u);
}

TEST(BackendRestartTest, ARestartInPlaceReportsTheStoppedTasksLostAndLeavesTheSession) {
  BackendOptions options = testOptions();
  options.reconnect_timeout = Millis(10000);
  Harness h(options);
  h.runToRunning();
  h.launch(1);
  h.launch(2);
  h.report(2, TaskState::kFinished);
  h.backend.onRestartRequested("received SIGUSR2");
  EXPECT_EQ(h.backend.state(), State::kStopping);
  ASSERT_EQ(h.executor.stop_all_calls.size(), 1u);
  h.report(1, TaskState::kKilled, "killed by the agent");
  h.timers.advance(Millis(0));
  EXPECT_EQ(h.exiter.codes, exitCodes({ExitCode::kRestartInPlace}));
  EXPECT_EQ(h.link.attemptedOfType("RemoveExecutor"), 0u) << "the driver holds the executor";
  const auto one = updatesFor(h, 1);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].state, TaskState::kLost) << "rerun elsewhere, no attempt counted";
  EXPECT_THAT(one[0].reason, HasSubstr("restarted in place"));
  const auto two = updatesFor(h, 2);
  ASSERT_EQ(two.size(), 1u);
  EXPECT_EQ(two[0].state, TaskState::kFinished) << "a task that had ended keeps its status";
}

TEST(BackendRestartTest, ALaunchThatArrivesWhileRestartingIsLostNotKilled) {
  BackendOptions options = testOptions();
  options.reconnect_timeout = Millis(10000);
  Harness h(options);
  h.runToRunning();
  h.backend.onRestartRequested("received SIGUSR2");
  // The driver rescheduled a task the restart stopped, onto this agent, before it saw it go.
  h.launch(5);
  const auto five = updatesFor(h, 5);
  ASSERT_EQ(five.size(), 1u);
  EXPECT_EQ(five[0].state, TaskState::kLost) << "no attempt counted against the task";
  EXPECT_THAT(five[0].reason, HasSubstr("restarting in place"));
  EXPECT_TRUE(h.executor.launched.empty());
}

}  // namespace
}  // namespace dockhand::agent::backend_testing
