// Unit tests of DecommissionFlow, phase by phase: every trigger (signal, the driver's request,
// a second trigger), every answer (accepted, refused, failed), every pass outcome, the check
// timer, the deadline and the Backend's exit, each in every phase where it can arrive. The
// ports are the shared fakes (tests/support/fake_ports.h); the Backend is a FakeHost that
// records exits and, like the Backend, stops the flow when it exits. (Over 600 lines: the
// whole phase-by-event grid stays in one file, in the order of the phases.)
#include "core/decommission_flow.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "fake_ports.h"
#include "log_capture.h"

namespace dockhand::agent {
namespace {

namespace proto = dockhand::protocol;
using fakes::completePass;
using fakes::errorResult;
using fakes::FakeDecommissioner;
using fakes::FakeLink;
using fakes::FakeTimers;
using fakes::LogCapture;
using fakes::okResult;
using ::testing::HasSubstr;
using Phase = DecommissionPhase;

constexpr char kExecutorId[] = "exec-17";
constexpr Millis kAskTimeout{30000};
constexpr Millis kCheck{1000};

struct ExitCall {
  ExitCode code;
  std::string reason;
};

class FakeHost : public DecommissionFlow::Host {
 public:
  std::size_t runningTasks() const override { return running; }
  bool registered() const override { return is_registered; }
  bool stopping() const override { return is_stopping; }
  void driverAnswered() override { ++driver_answers; }
  bool sendInOrder(proto::Envelope frame) override {
    in_order.push_back(std::move(frame));
    return sends_now;
  }
  // As the Backend's exit: from now on the executor stops, and the flow is stopped.
  void exit(ExitCode code, const std::string& reason) override {
    exits.push_back(ExitCall{code, reason});
    is_stopping = true;
    if (flow != nullptr) flow->stop();
  }

  DecommissionFlow* flow = nullptr;
  std::size_t running = 0;
  bool is_registered = true;
  bool is_stopping = false;
  bool sends_now = true;
  int driver_answers = 0;
  std::vector<proto::Envelope> in_order;
  std::vector<ExitCall> exits;
};

struct Harness {
  explicit Harness(DecommissionOptions options = {}, bool with_decommissioner = true)
      : flow(options, kExecutorId, kAskTimeout, link, timers,
             with_decommissioner ? &decommissioner : nullptr, host) {
    host.flow = &flow;
  }

  // The driver's DecommissionExecutor: Inactive -> Decommissioning.
  void request() { flow.onDriverRequest("scale down"); }
  void answerPeers() {
    link.takeAsk("GetPeers")
        .done(okResult(proto::toJson(std::vector<proto::Peer>{{"exec-2", "http://peer:1"}})));
  }
  // A task ends: the host no longer counts it, and the flow hears of it.
  void taskEnds() {
    --host.running;
    flow.onTaskEnded();
  }
  // The Backend exits for a cause of its own (driver lost, StopExecutor, ...).
  void exitForAnotherCause() {
    host.is_stopping = true;
    flow.stop();
  }
  std::size_t asked(std::string_view type) const { return link.attemptedOfType(type); }
  Json progress() const { return flow.progress(); }

  FakeLink link;
  FakeTimers timers;
  FakeDecommissioner decommissioner;
  FakeHost host;
  DecommissionFlow flow;
};

proto::BlockInfo blockAt(std::string id, std::uint64_t size = 100) {
  proto::BlockInfo info;
  info.id = std::move(id);
  info.size = size;
  info.checksum = "xxh64:0000000000000001";
  info.executor_id = "exec-2";
  info.url = "http://peer:1/blocks/" + info.id;
  return info;
}

MigrationPassResult failedPass(std::vector<std::string> ids) {
  MigrationPassResult result;
  for (auto& id : ids) result.failed.emplace_back(std::move(id), "no peers");
  result.blocks_left = result.failed.size();
  result.bytes_left = 100 * result.failed.size();
  return result;
}

// ---- The phases and their moves ------------------------------------------------------------

TEST(DecommissionFlowTest, LegalMovesAreExactlyTheDrawnOnes) {
  const std::vector<std::pair<Phase, Phase>> legal = {
      {Phase::kInactive, Phase::kAskingDriver},
      {Phase::kInactive, Phase::kDecommissioning},
      {Phase::kAskingDriver, Phase::kInactive},
      {Phase::kAskingDriver, Phase::kDecommissioning},
      {Phase::kDecommissioning, Phase::kFinished},
      {Phase::kDecommissioning, Phase::kDeadlinePassed}};
  const Phase all[] = {Phase::kInactive, Phase::kAskingDriver, Phase::kDecommissioning,
                       Phase::kFinished, Phase::kDeadlinePassed};
  for (Phase from : all) {
    for (Phase to : all) {
      bool expected = std::find(legal.begin(), legal.end(), std::pair{from, to}) != legal.end();
      EXPECT_EQ(DecommissionFlow::isLegalMove(from, to), expected)
          << toString(from) << " -> " << toString(to);
    }
  }
}

// ---- Inactive ------------------------------------------------------------------------------

TEST(DecommissionFlowTest, StartsInactiveDoingNothing) {
  Harness h;
  EXPECT_EQ(h.flow.phase(), Phase::kInactive);
  EXPECT_FALSE(h.flow.decommissioning());
  EXPECT_TRUE(h.progress().is_null());
  h.flow.onTaskEnded();
  h.timers.advance(Millis(60000));
  EXPECT_TRUE(h.link.attempted.empty());
  EXPECT_EQ(h.timers.pending(), 0u);
}

TEST(DecommissionFlowTest, SignalAsksTheDriverFirst) {
  Harness h;
  h.flow.onSignal();
  EXPECT_EQ(h.flow.phase(), Phase::kAskingDriver);
  EXPECT_FALSE(h.flow.decommissioning());
  EXPECT_TRUE(h.progress().is_null());
  ASSERT_EQ(h.link.asks.size(), 1u);
  const auto& ask = h.link.asks.front();
  EXPECT_EQ(ask.message.type, "ExecutorDecommissioning");
  EXPECT_EQ(proto::decodeBody<proto::ExecutorDecommissioning>(ask.message.body).executor_id,
            kExecutorId);
  EXPECT_EQ(ask.timeout, kAskTimeout);
  EXPECT_EQ(h.decommissioner.begins, 0);
  EXPECT_EQ(h.timers.pending(), 0u);
}

TEST(DecommissionFlowTest, DriverRequestStartsAtOnceWithAPassAndTheCheckTimer) {
  Harness h;
  h.request();
  EXPECT_EQ(h.flow.phase(), Phase::kDecommissioning);
  EXPECT_TRUE(h.flow.decommissioning());
  EXPECT_EQ(h.decommissioner.begins, 1);
  EXPECT_EQ(h.asked("ExecutorDecommissioning"), 0u);
  ASSERT_EQ(h.link.asks.size(), 1u);
  EXPECT_EQ(h.link.asks.front().message.type, "GetPeers");
  EXPECT_EQ(proto::decodeBody<proto::GetPeers>(h.link.asks.front().message.body).executor_id,
            kExecutorId);
  EXPECT_EQ(h.timers.delays, std::vector<Millis>{kCheck}) << "no deadline by default";
}

TEST(DecommissionFlowTest, DeadlineIsScheduledWhenSet) {
  DecommissionOptions options;
  options.check_interval = Millis(250);
  options.deadline = Millis(5000);
  Harness h(options);
  h.request();
  EXPECT_EQ(h.timers.delays, (std::vector<Millis>{Millis(5000), Millis(250)}));
}

TEST(DecommissionFlowTest, DisabledIgnoresSignalAndRequest) {
  DecommissionOptions options;
  options.enabled = false;
  Harness h(options);
  LogCapture log;
  h.flow.onSignal();
  h.request();
  EXPECT_EQ(h.flow.phase(), Phase::kInactive);
  EXPECT_TRUE(h.link.attempted.empty());
  EXPECT_EQ(h.decommissioner.begins, 0);
  EXPECT_EQ(h.timers.pending(), 0u);
  EXPECT_THAT(log.text(), HasSubstr("decommission is disabled on this agent"));
  EXPECT_THAT(log.text(), HasSubstr("request (scale down), but decommission is disabled"));
}

TEST(DecommissionFlowTest, BeforeRegistrationSignalAndRequestAreIgnored) {
  Harness h;
  h.host.is_registered = false;
  LogCapture log;
  h.flow.onSignal();
  h.request();
  EXPECT_EQ(h.flow.phase(), Phase::kInactive);
  EXPECT_TRUE(h.link.attempted.empty());
  EXPECT_EQ(h.decommissioner.begins, 0);
  EXPECT_THAT(log.text(), HasSubstr("decommission signal before executor exec-17 registered"));
  EXPECT_THAT(log.text(), HasSubstr("decommission request before executor exec-17 registered"));
}

TEST(DecommissionFlowTest, WhileStoppingSignalAndRequestAreIgnored) {
  Harness h;
  h.exitForAnotherCause();
  LogCapture log;
  h.flow.onSignal();
  h.request();
  EXPECT_EQ(h.flow.phase(), Phase::kInactive);
  EXPECT_TRUE(h.link.attempted.empty());
  EXPECT_EQ(h.decommissioner.cancels, 0);
  EXPECT_THAT(log.text(), HasSubstr("decommission signal ignored: the executor is stopping"));
  EXPECT_THAT(log.text(), HasSubstr("decommission request ignored: the executor is stopping"));
}

// ---- AskingDriver --------------------------------------------------------------------------

TEST(DecommissionFlowTest, AcceptedAnswerStartsDecommissioning) {
  Harness h;
  h.flow.onSignal();
  h.link.takeAsk("ExecutorDecommissioning").done(okResult(Json{{"accepted", true}}));
  EXPECT_EQ(h.flow.phase(), Phase::kDecommissioning);
  EXPECT_EQ(h.host.driver_answers, 1);
  EXPECT_EQ(h.decommissioner.begins, 1);
  EXPECT_EQ(h.asked("GetPeers"), 1u);
  EXPECT_EQ(h.timers.pending(), 1u);
}

TEST(DecommissionFlowTest, AnswerWithoutAcceptedCountsAsAccepted) {
  Harness h;
  h.flow.onSignal();
  h.link.takeAsk("ExecutorDecommissioning").done(okResult(Json::object()));
  EXPECT_EQ(h.flow.phase(), Phase::kDecommissioning);
}

TEST(DecommissionFlowTest, RefusedAnswerReturnsToInactiveAndALaterSignalAsksAgain) {
  Harness h;
  LogCapture log;
  h.flow.onSignal();
  h.link.takeAsk("ExecutorDecommissioning").done(okResult(Json{{"accepted", false}}));
  EXPECT_EQ(h.flow.phase(), Phase::kInactive);
  EXPECT_EQ(h.decommissioner.begins, 0);
  EXPECT_EQ(h.timers.pending(), 0u);
  EXPECT_THAT(log.text(), HasSubstr("did not accept the decommissioning of executor exec-17"));
  h.flow.onSignal();
  EXPECT_EQ(h.flow.phase(), Phase::kAskingDriver);
  EXPECT_EQ(h.asked("ExecutorDecommissioning"), 2u);
}

TEST(DecommissionFlowTest, FailedAskReturnsToInactive) {
  Harness h;
  LogCapture log;
  h.flow.onSignal();
  h.link.takeAsk("ExecutorDecommissioning")
      .done(errorResult(proto::error_code::kTimeout, "no reply within 30000 ms"));
  EXPECT_EQ(h.flow.phase(), Phase::kInactive);
  EXPECT_EQ(h.host.driver_answers, 0);
  EXPECT_EQ(h.decommissioner.begins, 0);
  EXPECT_THAT(log.text(), HasSubstr("cannot tell the driver that executor exec-17 starts "
                                    "decommissioning (no reply within 30000 ms)"));
}

TEST(DecommissionFlowTest, SecondSignalWhileAskingIsIgnored) {
  Harness h;
  LogCapture log;
  h.flow.onSignal();
  h.flow.onSignal();
  EXPECT_EQ(h.asked("ExecutorDecommissioning"), 1u);
  EXPECT_EQ(h.flow.phase(), Phase::kAskingDriver);
  EXPECT_THAT(log.text(), HasSubstr("already started decommissioning; ignoring the signal"));
}

TEST(DecommissionFlowTest, DriverRequestWhileAskingStartsAndTheLateAnswerChangesNothing) {
  for (bool accepted : {true, false}) {
    SCOPED_TRACE(accepted ? "accepted" : "refused");
    Harness h;
    h.flow.onSignal();
    h.request();
    EXPECT_EQ(h.flow.phase(), Phase::kDecommissioning);
    h.link.takeAsk("ExecutorDecommissioning").done(okResult(Json{{"accepted", accepted}}));
    EXPECT_EQ(h.flow.phase(), Phase::kDecommissioning);
    EXPECT_EQ(h.decommissioner.begins, 1);
    EXPECT_EQ(h.asked("GetPeers"), 1u);
    EXPECT_EQ(h.timers.pending(), 1u);
  }
}

TEST(DecommissionFlowTest, ExitWhileAskingDropsTheAnswer) {
  Harness h;
  h.flow.onSignal();
  h.exitForAnotherCause();
  h.link.takeAsk("ExecutorDecommissioning").done(okResult(Json{{"accepted", true}}));
  EXPECT_EQ(h.flow.phase(), Phase::kInactive);
  EXPECT_FALSE(h.flow.decommissioning());
  EXPECT_EQ(h.decommissioner.begins, 0);
  EXPECT_EQ(h.asked("GetPeers"), 0u);
  EXPECT_EQ(h.timers.pending(), 0u);
}

// ---- Decommissioning -----------------------------------------------------------------------

TEST(DecommissionFlowTest, SecondTriggerWhileDecommissioningIsIgnored) {
  Harness h;
  LogCapture log;
  h.request();
  h.flow.onSignal();
  h.flow.onDriverRequest("again");
  EXPECT_EQ(h.decommissioner.begins, 1);
  EXPECT_EQ(h.asked("ExecutorDecommissioning"), 0u);
  EXPECT_EQ(h.asked("GetPeers"), 1u);
  EXPECT_EQ(h.timers.pending(), 1u);
  EXPECT_THAT(log.text(), HasSubstr("already started decommissioning; ignoring the signal"));
  EXPECT_THAT(log.text(), HasSubstr("already started decommissioning; ignoring (again)"));
}

TEST(DecommissionFlowTest, PassRunsOverThePeersTheDriverNamed) {
  Harness h;
  h.request();
  h.answerPeers();
  EXPECT_EQ(h.host.driver_answers, 1);
  ASSERT_EQ(h.decommissioner.passes.size(), 1u);
  ASSERT_EQ(h.decommissioner.passes[0].peers.size(), 1u);
  EXPECT_EQ(h.decommissioner.passes[0].peers[0].executor_id, "exec-2");
}

TEST(DecommissionFlowTest, FailedPeersAskStillRunsAPass) {
  Harness h;
  LogCapture log;
  h.request();
  h.link.takeAsk("GetPeers").done(errorResult(proto::error_code::kDisconnected, "link down"));
  ASSERT_EQ(h.decommissioner.passes.size(), 1u);
  EXPECT_TRUE(h.decommissioner.passes[0].peers.empty());
  EXPECT_EQ(h.host.driver_answers, 0);
  EXPECT_THAT(log.text(), HasSubstr("cannot get peers from the driver: link down"));
}

TEST(DecommissionFlowTest, ConclusivePassWithNoTaskRunningFinishesAtTheNextCheck) {
  Harness h;
  h.request();
  h.answerPeers();
  h.decommissioner.finishPass(completePass());
  EXPECT_TRUE(h.host.exits.empty()) << "only the check timer ends it";
  h.timers.advance(kCheck);
  ASSERT_EQ(h.host.exits.size(), 1u);
  EXPECT_EQ(h.host.exits[0].code, ExitCode::kSuccess);
  EXPECT_EQ(h.host.exits[0].reason, "decommission finished");
  EXPECT_EQ(h.flow.phase(), Phase::kFinished);
  EXPECT_EQ(h.progress()["state"], "finished");
  EXPECT_EQ(h.timers.pending(), 0u);
  EXPECT_EQ(h.asked("GetPeers"), 1u);
}

TEST(DecommissionFlowTest, WaitsForRunningTasksThenPassesAgainAfterTheLastEnds) {
  Harness h;
  h.host.running = 1;
  h.request();
  h.answerPeers();
  h.decommissioner.finishPass(completePass());
  h.timers.advance(kCheck * 5);
  EXPECT_TRUE(h.host.exits.empty());
  EXPECT_EQ(h.asked("GetPeers"), 1u) << "a conclusive pass is not repeated while tasks run";
  EXPECT_EQ(h.progress()["state"], "waiting-for-tasks");
  EXPECT_EQ(h.progress()["running_tasks"], 1);

  h.taskEnds();
  h.timers.advance(kCheck);
  EXPECT_TRUE(h.host.exits.empty()) << "the last pass started before the task ended";
  h.answerPeers();
  h.decommissioner.finishPass(completePass());
  h.timers.advance(kCheck);
  ASSERT_EQ(h.host.exits.size(), 1u);
  EXPECT_EQ(h.host.exits[0].code, ExitCode::kSuccess);
}

TEST(DecommissionFlowTest, TaskEndingDuringAPassMakesItInconclusive) {
  Harness h;
  h.host.running = 1;
  h.request();
  h.answerPeers();
  h.taskEnds();  // while pass 1 runs
  h.decommissioner.finishPass(completePass({blockAt("shuffle_0_0_0")}));
  h.timers.advance(kCheck);
  EXPECT_TRUE(h.host.exits.empty());
  EXPECT_EQ(h.asked("GetPeers"), 2u) << "a second pass starts";
  h.answerPeers();
  h.decommissioner.finishPass(completePass({blockAt("shuffle_0_1_0")}));
  h.timers.advance(kCheck);
  ASSERT_EQ(h.host.exits.size(), 1u);
  EXPECT_EQ(h.decommissioner.released,
            (std::vector<std::string>{"shuffle_0_0_0", "shuffle_0_1_0"}));
  EXPECT_EQ(h.progress()["passes"], 2);
}

TEST(DecommissionFlowTest, InconclusivePassIsFollowedByAnother) {
  Harness h;
  h.request();
  h.answerPeers();
  h.decommissioner.finishPass(failedPass({"rdd_1_1"}));
  EXPECT_EQ(h.progress()["blocks_failed"], 1);
  EXPECT_EQ(h.progress()["blocks_left"], 1);
  h.timers.advance(kCheck);
  EXPECT_TRUE(h.host.exits.empty());
  EXPECT_EQ(h.asked("GetPeers"), 2u);
  h.answerPeers();
  h.decommissioner.finishPass(completePass({blockAt("rdd_1_1")}));
  EXPECT_EQ(h.progress()["blocks_failed"], 0) << "counts the last pass only";
  h.timers.advance(kCheck);
  ASSERT_EQ(h.host.exits.size(), 1u);
}

TEST(DecommissionFlowTest, OnePassAtATime) {
  Harness h;
  h.request();
  h.timers.advance(kCheck * 3);  // GetPeers still unanswered
  EXPECT_EQ(h.asked("GetPeers"), 1u);
  h.answerPeers();
  h.timers.advance(kCheck * 3);  // the pass still runs
  EXPECT_EQ(h.asked("GetPeers"), 1u);
  EXPECT_EQ(h.decommissioner.passes.size(), 1u);
  EXPECT_TRUE(h.host.exits.empty());
}

TEST(DecommissionFlowTest, MovedBlocksAreSentInOrderThenReleased) {
  Harness h;
  h.request();
  h.answerPeers();
  h.decommissioner.finishPass(completePass({blockAt("rdd_2_0", 300), blockAt("rdd_2_1", 200)}));
  ASSERT_EQ(h.host.in_order.size(), 1u);
  auto info = proto::decodeBody<proto::UpdateBlockInfo>(h.host.in_order[0].body);
  EXPECT_EQ(info.executor_id, kExecutorId);
  ASSERT_EQ(info.added.size(), 2u);
  EXPECT_EQ(info.added[0].executor_id, "exec-2");
  EXPECT_EQ(info.removed, (std::vector<std::string>{"rdd_2_0", "rdd_2_1"}));
  EXPECT_EQ(h.decommissioner.released, (std::vector<std::string>{"rdd_2_0", "rdd_2_1"}));
  EXPECT_EQ(h.progress()["blocks_migrated"], 2);
  EXPECT_EQ(h.progress()["bytes_migrated"], 500);
}

TEST(DecommissionFlowTest, MovedBlocksTheDriverWasNotToldOfAreKeptAndPassedAgain) {
  Harness h;
  h.request();
  h.answerPeers();
  h.host.sends_now = false;
  h.decommissioner.finishPass(completePass({blockAt("rdd_2_0", 300)}));
  EXPECT_EQ(h.host.in_order.size(), 1u);
  EXPECT_TRUE(h.decommissioner.released.empty());
  EXPECT_EQ(h.progress()["blocks_migrated"], 0);
  EXPECT_EQ(h.progress()["blocks_left"], 1);
  EXPECT_EQ(h.progress()["bytes_left"], 300);
  h.timers.advance(kCheck);
  EXPECT_TRUE(h.host.exits.empty()) << "an untold move does not prove the blocks safe";
  EXPECT_EQ(h.asked("GetPeers"), 2u);
}

TEST(DecommissionFlowTest, WithoutMigrationExitsOnceNoTaskRuns) {
  Harness h;
  h.decommissioner.migration_enabled = false;
  h.host.running = 1;
  h.request();
  EXPECT_EQ(h.decommissioner.begins, 1);
  EXPECT_EQ(h.asked("GetPeers"), 0u);
  h.timers.advance(kCheck * 3);
  EXPECT_TRUE(h.host.exits.empty());
  EXPECT_EQ(h.progress()["state"], "waiting-for-tasks");
  h.taskEnds();
  EXPECT_EQ(h.progress()["state"], "finishing");
  h.timers.advance(kCheck);
  ASSERT_EQ(h.host.exits.size(), 1u);
  EXPECT_EQ(h.host.exits[0].code, ExitCode::kSuccess);
  EXPECT_EQ(h.host.exits[0].reason, "decommission finished");
  EXPECT_TRUE(h.decommissioner.passes.empty());
}

TEST(DecommissionFlowTest, WithoutADecommissionerOnlyWaitsForTasks) {
  Harness h({}, /*with_decommissioner=*/false);
  h.host.running = 1;
  h.request();
  EXPECT_EQ(h.asked("GetPeers"), 0u);
  h.timers.advance(kCheck);
  EXPECT_TRUE(h.host.exits.empty());
  h.taskEnds();
  h.timers.advance(kCheck);
  ASSERT_EQ(h.host.exits.size(), 1u);
  EXPECT_EQ(h.host.exits[0].code, ExitCode::kSuccess);
}

TEST(DecommissionFlowTest, ProgressCountsARunningPassBlockByBlock) {
  Harness h;
  h.request();
  h.answerPeers();
  auto report = h.decommissioner.passes.front().progress;
  // Nothing moved yet: no rate, no time left.
  EXPECT_TRUE(h.progress()["bytes_per_s"].is_null()) << h.progress();
  EXPECT_TRUE(h.progress()["eta_ms"].is_null()) << h.progress();
  h.timers.advance(Millis(1000));
  report(MigrationPassProgress{4, 4000, 3, 2500});
  // 2500 bytes in the second since the pass began; 1500 left take 600 ms at that rate.
  EXPECT_EQ(h.progress(), (Json{{"state", "migrating"},
                                {"running_tasks", 0},
                                {"bytes_per_s", 2500},
                                {"eta_ms", 600},
                                {"blocks_total", 4},
                                {"blocks_migrated", 3},
                                {"blocks_failed", 0},
                                {"blocks_left", 1},
                                {"bytes_total", 4000},
                                {"bytes_migrated", 2500},
                                {"bytes_left", 1500},
                                {"passes", 1}}));
  MigrationPassResult result = completePass({blockAt("rdd_1_0", 1000), blockAt("rdd_1_1", 1000)});
  result.complete = false;
  result.failed = {{"rdd_1_2", "HTTP 507"}};
  result.blocks_left = 1;
  result.bytes_left = 2000;
  h.decommissioner.finishPass(result);
  report(MigrationPassProgress{4, 4000, 4, 4000});  // late: changes nothing
  EXPECT_EQ(h.progress(), (Json{{"state", "migrating"},
                                {"running_tasks", 0},
                                {"bytes_per_s", 2000},
                                {"eta_ms", 1000},
                                {"blocks_total", 3},
                                {"blocks_migrated", 2},
                                {"blocks_failed", 1},
                                {"blocks_left", 1},
                                {"bytes_total", 4000},
                                {"bytes_migrated", 2000},
                                {"bytes_left", 2000},
                                {"passes", 1}}));
}

TEST(DecommissionFlowTest, DeadlineExitsIncompleteNamingWhatIsLeft) {
  DecommissionOptions options;
  options.deadline = Millis(5000);
  Harness h(options);
  LogCapture log;
  h.host.running = 1;
  h.request();
  h.answerPeers();
  h.decommissioner.finishPass(failedPass({"rdd_7_1", "shuffle_3_0_2"}));
  h.timers.advance(kCheck);
  h.answerPeers();  // the second pass, asked at the first check, still runs at the deadline
  h.decommissioner.left = {"rdd_7_1", "shuffle_3_0_2"};
  h.timers.advance(Millis(3999));
  EXPECT_TRUE(h.host.exits.empty());
  h.timers.advance(Millis(1));
  ASSERT_EQ(h.host.exits.size(), 1u);
  EXPECT_EQ(h.host.exits[0].code, ExitCode::kDecommissionIncomplete);
  EXPECT_EQ(h.host.exits[0].reason,
            "decommission deadline (5000 ms) passed: 2 block(s) not migrated, 1 task(s) running");
  EXPECT_EQ(h.flow.phase(), Phase::kDeadlinePassed);
  EXPECT_EQ(h.progress()["state"], "deadline-passed");
  EXPECT_EQ(h.decommissioner.cancels, 1) << "the running pass is asked to stop";
  EXPECT_EQ(h.timers.pending(), 0u);
  EXPECT_THAT(log.text(), HasSubstr("block rdd_7_1 was not migrated before the deadline"));
  EXPECT_THAT(log.text(), HasSubstr("block shuffle_3_0_2 was not migrated before the deadline"));
  EXPECT_THAT(log.text(), HasSubstr("1 task(s) still running at the decommission deadline"));
}

TEST(DecommissionFlowTest, ExitWhileDecommissioningStopsTimersAndPassButKeepsProgress) {
  DecommissionOptions options;
  options.deadline = Millis(5000);
  Harness h(options);
  h.host.running = 1;
  h.request();
  h.answerPeers();
  h.exitForAnotherCause();
  EXPECT_EQ(h.timers.pending(), 0u);
  EXPECT_EQ(h.decommissioner.cancels, 1);
  EXPECT_EQ(h.flow.phase(), Phase::kDecommissioning);
  EXPECT_EQ(h.progress()["state"], "waiting-for-tasks");
  // The pass's result still arrives: nothing is told or released.
  h.decommissioner.finishPass(completePass({blockAt("rdd_1_0")}));
  EXPECT_TRUE(h.host.in_order.empty());
  EXPECT_TRUE(h.decommissioner.released.empty());
  h.taskEnds();
  h.timers.advance(Millis(60000));
  EXPECT_TRUE(h.host.exits.empty());
  EXPECT_EQ(h.asked("GetPeers"), 1u);
}

TEST(DecommissionFlowTest, ExitWhileWaitingForPeersStartsNoPass) {
  Harness h;
  h.request();
  h.exitForAnotherCause();
  EXPECT_EQ(h.decommissioner.cancels, 1);
  h.answerPeers();
  EXPECT_TRUE(h.decommissioner.passes.empty());
  EXPECT_EQ(h.host.driver_answers, 0);
}

// ---- Finished and DeadlinePassed -----------------------------------------------------------

TEST(DecommissionFlowTest, FinishedAndDeadlinePassedAreFinal) {
  for (bool deadline : {false, true}) {
    SCOPED_TRACE(deadline ? "deadline-passed" : "finished");
    DecommissionOptions options;
    if (deadline) options.deadline = Millis(500);
    Harness h(options);
    h.decommissioner.migration_enabled = false;
    h.host.running = deadline ? 1 : 0;
    h.request();
    h.timers.advance(kCheck);
    ASSERT_EQ(h.host.exits.size(), 1u);
    const Phase final_phase = deadline ? Phase::kDeadlinePassed : Phase::kFinished;
    EXPECT_EQ(h.flow.phase(), final_phase);

    LogCapture log;
    h.flow.onSignal();
    h.request();
    h.flow.onTaskEnded();
    h.flow.stop();
    h.timers.advance(Millis(60000));
    EXPECT_EQ(h.flow.phase(), final_phase);
    EXPECT_TRUE(h.flow.decommissioning());
    EXPECT_EQ(h.host.exits.size(), 1u);
    EXPECT_EQ(h.decommissioner.begins, 1);
    EXPECT_TRUE(h.link.attempted.empty());
    EXPECT_THAT(log.text(), HasSubstr("already started decommissioning"));
    EXPECT_THAT(log.text(), ::testing::Not(HasSubstr("illegal decommission transition")));
  }
}

}  // namespace
}  // namespace dockhand::agent
