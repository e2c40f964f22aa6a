// Unit tests of the Backend across its own restart: a restart in place (SIGUSR2) stops the
// tasks, reports them LOST and leaves without RemoveExecutor; the next process, told that the
// work directory holds this executor's session (resume_after_restart), resumes it after the
// app config instead of registering, and reports LOST every task the driver counted there. A
// refused resume is followed by a registration on a new connection. The running tasks a
// runner can hand over go to the next program, which takes them back before its resume.
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
// `taken_back`: the tasks the previous program handed over that run here again.
struct Restarted {
  explicit Restarted(std::vector<HandedOverTask> tasks = {})
      : taken_back(std::move(tasks)), h(options()) {
    h.connect();
    h.answerAppConfig();
  }
  BackendOptions options() {
    BackendOptions o = restartedOptions();
    o.on_resume_refused = [this] { ++refused; };
    o.take_back_tasks = [this] {
      ++take_back_calls;
      return taken_back;
    };
    return o;
  }
  std::vector<HandedOverTask> taken_back;
  int refused = 0;
  int take_back_calls = 0;
  Harness h;
};

HandedOverTask handedOver(std::uint64_t task_id, int cpus = 1,
                          std::map<std::string, std::vector<std::string>> resources = {}) {
  return HandedOverTask{task_id, "process", Json{{"task", task_id}}, cpus, std::move(resources)};
}

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

  ask.done(okResult(proto::toJson(proto::ResumeAccepted{.tasks = {4, 9}})));
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

TEST(BackendRestartTest, ARestartInPlaceHandsOverWhatItsRunnersCanAndStopsTheRest) {
  BackendOptions options = testOptions();
  options.reconnect_timeout = Millis(10000);
  std::vector<HandedOverTask> kept;
  options.on_handed_over = [&](const std::vector<HandedOverTask>& tasks) { kept = tasks; };
  Harness h(options);
  h.runToRunning();
  h.launch(1, 2, {{"gpu", {"0"}}});
  h.launch(2);
  h.executor.hand_over = {1};
  h.backend.onRestartRequested("received SIGUSR2");
  EXPECT_EQ(h.executor.hand_over_calls, 1);
  ASSERT_EQ(kept.size(), 1u);
  EXPECT_EQ(kept[0].task_id, 1u);
  EXPECT_EQ(kept[0].cpus, 2) << "what it holds goes with it";
  EXPECT_EQ(kept[0].resources.at("gpu"), (std::vector<std::string>{"0"}));
  ASSERT_EQ(h.executor.stop_all_calls.size(), 1u) << "task 2 cannot go on: it is stopped";
  h.report(2, TaskState::kKilled, "killed by the agent");
  h.timers.advance(Millis(0));
  EXPECT_EQ(h.exiter.codes, exitCodes({ExitCode::kRestartInPlace}));
  EXPECT_TRUE(updatesFor(h, 1).empty()) << "the next program reports it";
  ASSERT_EQ(updatesFor(h, 2).size(), 1u);
  EXPECT_EQ(updatesFor(h, 2)[0].state, TaskState::kLost);
}

TEST(BackendRestartTest, NoTaskIsHandedOverWhenTheNextProgramCannotResume) {
  BackendOptions options = testOptions();  // reconnect_timeout 0: this agent does not resume
  int handed = 0;
  options.on_handed_over = [&](const std::vector<HandedOverTask>&) { ++handed; };
  Harness h(options);
  h.runToRunning();
  h.launch(1);
  h.executor.hand_over = {1};
  h.backend.onRestartRequested("received SIGUSR2");
  EXPECT_EQ(h.executor.hand_over_calls, 0);
  EXPECT_EQ(handed, 0);
  EXPECT_EQ(h.executor.stop_all_calls.size(), 1u);
}

TEST(BackendRestartTest, TasksTakenBackAreListedInTheResumeAndReportOnlyTheirEnd) {
  Restarted r({handedOver(4, 2, {{"gpu", {"1"}}}), handedOver(6)});
  Harness& h = r.h;
  EXPECT_EQ(r.take_back_calls, 1);
  PendingAsk ask = h.link.takeAsk("ResumeExecutor");
  const auto resume = proto::decodeBody<proto::ResumeExecutor>(ask.message.body);
  EXPECT_EQ(resume.running, (std::vector<std::uint64_t>{4, 6}));
  // Task 4 ended before the driver answered: held back until it has.
  h.report(4, TaskState::kFinished);
  EXPECT_TRUE(updatesFor(h, 4).empty()) << "nothing is sent before the resume is accepted";

  // The driver counts 4 and 9 here; 6 it ran elsewhere meanwhile.
  ask.done(okResult(proto::toJson(proto::ResumeAccepted{.tasks = {4, 9}})));
  EXPECT_EQ(h.backend.state(), State::kRunning);
  const auto four = updatesFor(h, 4);
  ASSERT_EQ(four.size(), 1u);
  EXPECT_EQ(four[0].state, TaskState::kFinished) << "its real end, reported once";
  EXPECT_EQ(four[0].cpus, 2);
  const auto nine = updatesFor(h, 9);
  ASSERT_EQ(nine.size(), 1u);
  EXPECT_EQ(nine[0].state, TaskState::kLost);
  ASSERT_EQ(h.executor.kills.size(), 1u);
  EXPECT_EQ(h.executor.kills[0].task_id, 6u) << "not run twice at once";
  EXPECT_TRUE(h.executor.kills[0].interrupt);
  h.report(6, TaskState::kKilled);
  EXPECT_TRUE(updatesFor(h, 6).empty()) << "the driver does not count it here";
  EXPECT_EQ(h.backend.runningTasks(), 0u);
}

TEST(BackendRestartTest, ARefusedResumeStopsTheTasksTakenBackAndReportsNothingOfThem) {
  Restarted r({handedOver(4), handedOver(6)});
  Harness& h = r.h;
  h.report(6, TaskState::kFailed, "exited with code 3");
  h.link.takeAsk("ResumeExecutor")
      .done(errorResult(proto::error_code::kNotResumable, "executor exec-17 is not held"));
  EXPECT_EQ(r.refused, 1);
  ASSERT_EQ(h.executor.kills.size(), 1u);
  EXPECT_EQ(h.executor.kills[0].task_id, 4u);
  h.report(4, TaskState::kKilled);

  h.link.is_connected = true;
  h.backend.onDriverConnected();
  h.answerAppConfig();
  h.acceptRegistration();
  EXPECT_EQ(h.backend.state(), State::kRunning);
  EXPECT_TRUE(updatesFor(h, 4).empty());
  EXPECT_TRUE(updatesFor(h, 6).empty()) << "the refused session's statuses are dropped";
  EXPECT_EQ(h.backend.runningTasks(), 0u);
}

// restart_wait: the tasks that cannot be handed over (a library task on a thread) get that long
// to end by themselves; the restart goes on as soon as they have.
struct WaitingRestart {
  WaitingRestart() : h(options()) {
    h.runToRunning();
    h.launch(1);
    h.launch(2);
    h.executor.hand_over = {1};
    h.backend.onRestartRequested("received SIGUSR2");
  }
  BackendOptions options() {
    BackendOptions o = testOptions();
    o.reconnect_timeout = Millis(10000);
    o.restart_wait = Millis(1000);
    o.on_handed_over = [this](const std::vector<HandedOverTask>& tasks) {
      handed.push_back(tasks.size());
    };
    return o;
  }
  std::vector<std::size_t> handed;  // sizes of each on_handed_over call
  Harness h;
};

TEST(BackendRestartTest, ARestartWaitsForTheTasksThatCannotBeHandedOver) {
  WaitingRestart w;
  Harness& h = w.h;
  EXPECT_EQ(w.handed, (std::vector<std::size_t>{1})) << "what can go on is handed over at once";
  EXPECT_TRUE(h.exiter.codes.empty()) << "task 2 gets its time";
  EXPECT_TRUE(h.executor.stop_all_calls.empty());
  h.launch(3);
  ASSERT_EQ(updatesFor(h, 3).size(), 1u);
  EXPECT_EQ(updatesFor(h, 3)[0].state, TaskState::kLost) << "no new work meanwhile";
  EXPECT_TRUE(h.executor.launchCount(3) == 0);

  h.report(2, TaskState::kFinished);
  ASSERT_EQ(updatesFor(h, 2).size(), 1u);
  EXPECT_EQ(updatesFor(h, 2)[0].state, TaskState::kFinished) << "it ended by itself";
  h.timers.advance(Millis(0));
  EXPECT_EQ(h.exiter.codes, exitCodes({ExitCode::kRestartInPlace}));
  EXPECT_EQ(w.handed.size(), 1u) << "handed over once: the session file keeps task 1";
}

TEST(BackendRestartTest, WhatIsStillRunningWhenTheWaitRunsOutIsStoppedAndLost) {
  WaitingRestart w;
  Harness& h = w.h;
  h.executor.on_stop_all = [&h] { h.report(2, TaskState::kKilled, "killed by the agent"); };
  h.timers.advance(Millis(999));
  EXPECT_TRUE(h.executor.stop_all_calls.empty());
  h.timers.advance(Millis(1));
  ASSERT_EQ(h.executor.stop_all_calls.size(), 1u);
  EXPECT_EQ(h.exiter.codes, exitCodes({ExitCode::kRestartInPlace}));
  ASSERT_EQ(updatesFor(h, 2).size(), 1u);
  EXPECT_EQ(updatesFor(h, 2)[0].state, TaskState::kLost);
  EXPECT_EQ(w.handed.size(), 1u);
}

}  // namespace
}  // namespace dockhand::agent::backend_testing
