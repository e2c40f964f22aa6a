// Unit tests of the Backend's handling of the driver's frames: its commands (stop, shutdown,
// log level, tokens, thread dumps, Hello) and malformed or unexpected input.
#include "backend_harness.h"

namespace dockhand::agent::backend_testing {
namespace {

// ---- Commands from the driver --------------------------------------------------------------

TEST(BackendTest, StopExecutorExitsSuccessStoppingTasksWithoutRemoveExecutor) {
  BackendOptions options = testOptions();
  options.stop_grace = Millis(7000);
  Harness h(options);
  h.runToRunning();
  h.launch(1);
  h.launch(2);
  h.deliverMessage(proto::StopExecutor{});
  EXPECT_EQ(h.backend.state(), State::kStopping);
  EXPECT_EQ(h.executor.stop_all_calls, std::vector<Millis>{Millis(7000)});
  h.timers.advance(Millis(0));
  EXPECT_EQ(h.exiter.codes, exitCodes({ExitCode::kSuccess}));
  EXPECT_EQ(h.link.attemptedOfType("RemoveExecutor"), 0u);
  EXPECT_EQ(h.link.close_calls, 1);
}

TEST(BackendTest, StopExecutorWithoutTasksSkipsStopAll) {
  Harness h;
  h.runToRunning();
  h.deliverMessage(proto::StopExecutor{});
  h.timers.advance(Millis(0));
  EXPECT_TRUE(h.executor.stop_all_calls.empty());
  EXPECT_EQ(h.exiter.codes, exitCodes({ExitCode::kSuccess}));
}

TEST(BackendTest, ShutdownWhenRegisteredExitsSuccess) {
  Harness h;
  h.runToRunning();
  h.launch(1);
  h.deliverMessage(proto::Shutdown{});
  h.timers.advance(Millis(0));
  EXPECT_EQ(h.exiter.codes, exitCodes({ExitCode::kSuccess}));
  EXPECT_EQ(h.executor.stop_all_calls.size(), 1u);
  EXPECT_EQ(h.link.attemptedOfType("RemoveExecutor"), 0u);
}

TEST(BackendTest, ShutdownBeforeRegistrationExitsInternalError) {
  Harness h;
  h.connect();
  h.answerAppConfig();  // registering
  h.deliverMessage(proto::Shutdown{});
  h.timers.advance(Millis(0));
  EXPECT_EQ(h.exiter.codes, exitCodes({ExitCode::kInternalError}));
  // A registration reply that still arrives changes nothing.
  h.acceptRegistration();
  EXPECT_EQ(h.backend.state(), State::kStopping);
  EXPECT_TRUE(h.link.sentOfType("LaunchedExecutor").empty());
}

TEST(BackendTest, UpdateExecutorLogLevelSetsLevel) {
  Harness h;
  h.runToRunning();
  std::size_t frames_before = h.link.sent.size();
  h.deliverMessage(proto::UpdateExecutorLogLevel{.level = "warn"}, /*id=*/4);
  EXPECT_EQ(h.log_control.levels, std::vector<std::string>{"warn"});
  EXPECT_EQ(h.link.sent.size(), frames_before) << "no complaint about a valid level";
}

TEST(BackendTest, UnknownLogLevelIsAnsweredWithError) {
  Harness h;
  h.runToRunning();
  h.deliverMessage(proto::UpdateExecutorLogLevel{.level = "loud"}, /*id=*/8);
  const proto::Envelope& reply = h.lastSent();
  EXPECT_TRUE(reply.isReply());
  EXPECT_EQ(reply.re, 8u);
  EXPECT_FALSE(reply.ok);
  ASSERT_TRUE(reply.error.has_value());
  EXPECT_EQ(reply.error->code, proto::error_code::kInvalidBody);
  EXPECT_THAT(reply.error->message, HasSubstr("loud"));

  h.deliverMessage(proto::UpdateExecutorLogLevel{.level = "loud"});
  EXPECT_TRUE(h.lastSent().isError());
  EXPECT_EQ(h.backend.state(), State::kRunning);
}

TEST(BackendTest, UpdateDelegationTokensAreKept) {
  Harness h;
  LogCapture log;
  h.runToRunning();
  EXPECT_FALSE(h.backend.hasDelegationTokens());
  h.deliverMessage(proto::UpdateDelegationTokens{.tokens = "dG9rZW5z"});
  EXPECT_TRUE(h.backend.hasDelegationTokens());
  EXPECT_EQ(h.backend.state(), State::kRunning);
  // The size logged is the tokens' (base64 "dG9rZW5z" is the 6 bytes "tokens"), never them.
  EXPECT_THAT(log.text(), HasSubstr("received delegation tokens (6 bytes)"));
  EXPECT_THAT(log.text(), Not(HasSubstr("dG9rZW5z")));
  h.deliverMessage(proto::UpdateDelegationTokens{.tokens = "YWI="});
  EXPECT_THAT(log.text(), HasSubstr("received delegation tokens (2 bytes)"));
}

TEST(BackendTest, DecommissionExecutorLetsRunningTasksGoOn) {
  Harness h;
  LogCapture log;
  h.runToRunning();
  h.launch(1);
  h.deliverMessage(proto::DecommissionExecutor{.reason = "node draining"});
  h.timers.advance(h.backend.heartbeatInterval());
  EXPECT_TRUE(h.backend.decommissioning());
  EXPECT_EQ(h.backend.state(), State::kRunning);
  EXPECT_EQ(h.backend.runningTasks(), 1u);
  EXPECT_TRUE(h.exiter.codes.empty());
  EXPECT_TRUE(h.executor.stop_all_calls.empty());
  EXPECT_TRUE(h.executor.kills.empty());
  EXPECT_THAT(log.text(), HasSubstr("Decommission executor exec-17 (node draining)"));
}

TEST(BackendTest, TaskThreadDumpRepliesWithExecutorsDump) {
  Harness h;
  h.runToRunning();
  h.launch(4);
  Json dump = {{"pid", 4711}, {"stack", {"main", "read"}}};
  h.executor.dumps[4] = dump;
  h.deliverMessage(proto::TaskThreadDump{.task_id = 4}, /*id=*/55);
  const proto::Envelope& reply = h.lastSent();
  EXPECT_TRUE(reply.isReply());
  EXPECT_EQ(reply.re, 55u);
  EXPECT_TRUE(reply.ok);
  EXPECT_EQ(reply.body, dump);
}

TEST(BackendTest, TaskThreadDumpForUnknownTaskRepliesUnknownTask) {
  Harness h;
  h.runToRunning();
  h.launch(4);  // running, but the executor has no dump for it
  for (std::uint64_t task_id : {4u, 404u}) {
    SCOPED_TRACE("task " + std::to_string(task_id));
    h.deliverMessage(proto::TaskThreadDump{.task_id = task_id}, /*id=*/60 + task_id);
    const proto::Envelope& reply = h.lastSent();
    EXPECT_TRUE(reply.isReply());
    EXPECT_EQ(reply.re, 60 + task_id);
    EXPECT_FALSE(reply.ok);
    ASSERT_TRUE(reply.error.has_value());
    EXPECT_EQ(reply.error->code, proto::error_code::kUnknownTask);
  }
}

TEST(BackendTest, HelloAskIsAnswered) {
  Harness h;
  h.runToRunning();
  h.deliverMessage(proto::Hello{.protocol_version = proto::kProtocolVersion,
                                .role = "driver",
                                .software = "dockhand-driver"},
                   3);
  const proto::Envelope& reply = h.lastSent();
  EXPECT_TRUE(reply.isReply());
  EXPECT_EQ(reply.re, 3u);
  EXPECT_TRUE(reply.ok);
  EXPECT_EQ(proto::decodeBody<proto::Hello>(reply.body).role, "agent");
}

// ---- Malformed input -----------------------------------------------------------------------

TEST(BackendTest, UnknownTypeWithIdRepliesUnknownType) {
  Harness h;
  h.runToRunning();
  proto::Envelope frame;
  frame.type = "Frobnicate";
  frame.id = 77;
  frame.body = Json::object();
  h.deliver(frame);
  const proto::Envelope& reply = h.lastSent();
  EXPECT_TRUE(reply.isReply());
  EXPECT_EQ(reply.re, 77u);
  EXPECT_FALSE(reply.ok);
  ASSERT_TRUE(reply.error.has_value());
  EXPECT_EQ(reply.error->code, proto::error_code::kUnknownType);
  EXPECT_THAT(reply.error->message, HasSubstr("Frobnicate"));
  EXPECT_EQ(h.backend.state(), State::kRunning);
}

TEST(BackendTest, UnknownTypeWithoutIdSendsErrorFrame) {
  Harness h;
  h.runToRunning();
  proto::Envelope frame;
  frame.type = "Frobnicate";
  h.deliver(frame);
  const proto::Envelope& error = h.lastSent();
  EXPECT_TRUE(error.isError());
  ASSERT_TRUE(error.error.has_value());
  EXPECT_EQ(error.error->code, proto::error_code::kUnknownType);
  EXPECT_EQ(h.backend.state(), State::kRunning);
}

TEST(BackendTest, LaunchTaskWithoutTaskIdIsInvalidBodyNamingPath) {
  Harness h;
  h.runToRunning();
  proto::Envelope frame;
  frame.type = "LaunchTask";
  frame.body = Json{{"task", {{"name", "no id"}, {"cpus", 1}}}};
  h.deliver(frame);
  const proto::Envelope& error = h.lastSent();
  EXPECT_TRUE(error.isError());
  ASSERT_TRUE(error.error.has_value());
  EXPECT_EQ(error.error->code, proto::error_code::kInvalidBody);
  EXPECT_THAT(error.error->message, HasSubstr("/task/task_id"));
  EXPECT_TRUE(h.executor.launched.empty());

  // The agent keeps running and takes the next good launch.
  h.timers.advance(Millis(0));
  EXPECT_TRUE(h.exiter.codes.empty());
  EXPECT_EQ(h.backend.state(), State::kRunning);
  h.launch(1);
  EXPECT_EQ(h.executor.launchCount(1), 1u);
}

TEST(BackendTest, InvalidBodyOfAnAskIsAnsweredWithReply) {
  Harness h;
  h.runToRunning();
  proto::Envelope frame;
  frame.type = "TaskThreadDump";
  frame.id = 14;
  frame.body = Json{{"task_id", "four"}};
  h.deliver(frame);
  const proto::Envelope& reply = h.lastSent();
  EXPECT_TRUE(reply.isReply());
  EXPECT_EQ(reply.re, 14u);
  ASSERT_TRUE(reply.error.has_value());
  EXPECT_EQ(reply.error->code, proto::error_code::kInvalidBody);
  EXPECT_THAT(reply.error->message, HasSubstr("/task_id"));
}

TEST(BackendTest, AgentToDriverMessageIsUnexpected) {
  Harness h;
  h.runToRunning();
  proto::RegisterExecutor reg;
  reg.executor_id = "someone-else";
  reg.hostname = "h";
  reg.cores = 1;
  h.deliverMessage(reg, /*id=*/90);
  const proto::Envelope& reply = h.lastSent();
  EXPECT_TRUE(reply.isReply());
  EXPECT_EQ(reply.re, 90u);
  ASSERT_TRUE(reply.error.has_value());
  EXPECT_EQ(reply.error->code, proto::error_code::kUnexpectedMessage);

  proto::StatusUpdate update;
  update.executor_id = "someone-else";
  h.deliverMessage(update);
  ASSERT_TRUE(h.lastSent().isError());
  EXPECT_EQ(h.lastSent().error->code, proto::error_code::kUnexpectedMessage);
  EXPECT_EQ(h.backend.state(), State::kRunning);
  EXPECT_TRUE(h.statusUpdates().empty());
}

TEST(BackendTest, ErrorFrameFromDriverIsNotAnswered) {
  Harness h;
  h.runToRunning();
  std::size_t frames_before = h.link.sent.size();
  h.deliver(proto::makeError(proto::error_code::kMalformedFrame, "bad frame from agent"));
  EXPECT_EQ(h.link.sent.size(), frames_before) << "answering an Error invites a ping-pong";
  EXPECT_EQ(h.backend.state(), State::kRunning);
}

}  // namespace
}  // namespace dockhand::agent::backend_testing
