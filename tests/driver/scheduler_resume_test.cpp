// The Scheduler holding a disconnected agent that registered with `resumes` (protocol.md 6.6):
// what it keeps while the agent is away, what a ResumeExecutor within the grace window gives
// back, and the loss past the window.
#include <algorithm>
#include <vector>

#include <gtest/gtest.h>

#include "dockhand/driver/scheduler.h"
#include "scheduler_fixture.h"

namespace dockhand::driver {
namespace {

using namespace scheduler_fixture;  // NOLINT(google-build-using-namespace)
using std::chrono::seconds;

constexpr Millis kGrace{30000};

class ResumeTest : public BlockSchedulingTest {
 protected:
  ResumeTest() { scheduler_ = Scheduler(SchedulerOptions{4, Millis(60000), 0, kGrace}); }

  // Registers `id` with `resumes` (and a block server), launched unless told otherwise.
  void addResumingAgent(const std::string& id, int cores, bool launched = true) {
    Actions out;
    protocol::RegisterExecutor reg = agentReg(id, cores);
    reg.block_url = "http://" + id + ":7337";
    reg.resumes = true;
    ASSERT_TRUE(scheduler_.registerAgent(reg, now_, out).ok());
    if (launched) {
      ASSERT_TRUE(scheduler_.agentLaunched(id, now_, out));
    }
    pending_.insert(pending_.end(), out.begin(), out.end());
  }

  static protocol::ResumeExecutor resumeOf(const std::string& id,
                                           std::vector<protocol::BlockInfo> blocks = {}) {
    protocol::ResumeExecutor r;
    r.executor_id = id;
    r.blocks = std::move(blocks);
    return r;
  }

  static std::vector<Action> kills(const Actions& actions) {
    std::vector<Action> out;
    for (const auto& a : actions) {
      if (a.kind == Action::Kind::kKill) out.push_back(a);
    }
    return out;
  }
};

TEST_F(ResumeTest, NextExpiryIsTheFirstAgentDueToBeDropped) {
  EXPECT_FALSE(scheduler_.nextExpiry()) << "no agent: nothing to wake for";
  addResumingAgent("a", 1);
  const TimePoint registered = now_;
  EXPECT_EQ(scheduler_.nextExpiry(), registered + Millis(60000) + Millis(1));
  now_ += Millis(5000);
  addResumingAgent("b", 1);
  scheduler_.touch("a", now_);  // a heard from: b is now the first due
  EXPECT_EQ(scheduler_.nextExpiry(), registered + Millis(5000) + Millis(60000) + Millis(1));
  Actions out;
  ASSERT_TRUE(scheduler_.disconnectAgent("a", "connection closed", now_, out));
  EXPECT_EQ(scheduler_.nextExpiry(), now_ + kGrace + Millis(1))
      << "held: its grace window ends first";
  // At that time, and not a millisecond before, it is dropped.
  EXPECT_TRUE(scheduler_.expireDisconnected(now_ + kGrace, out).empty());
  EXPECT_EQ(scheduler_.expireDisconnected(*scheduler_.nextExpiry(), out),
            std::vector<std::string>{"a"});
}

TEST_F(ResumeTest, DisconnectKeepsTheTasksAndLaunchesNothingThere) {
  addResumingAgent("a", 2);
  Actions out;
  scheduler_.submit(job({task("t0"), task("t1"), task("t2"), task("t3")}), now_, out);
  const auto first = launches(out);
  ASSERT_EQ(first.size(), 2u);

  Actions away;
  ASSERT_TRUE(scheduler_.disconnectAgent("a", "connection closed: reset", now_, away));
  EXPECT_TRUE(away.empty()) << "nothing is relaunched, nothing killed";
  const AgentInfo* a = scheduler_.agent("a");
  ASSERT_NE(a, nullptr);
  EXPECT_TRUE(a->disconnected_since.has_value());
  EXPECT_EQ(a->disconnect_reason, "connection closed: reset");
  EXPECT_EQ(a->running, 2u);
  EXPECT_EQ(reportedState(*a), "disconnected");
  for (const auto& launch : first) EXPECT_TRUE(scheduler_.isRunningOn(launch.task.task_id, "a"));
  Progress p = scheduler_.progress();
  EXPECT_EQ(p.running, 2u);
  EXPECT_EQ(p.pending, 2u);
  EXPECT_EQ(p.relaunches_after_loss, 0u);
  EXPECT_EQ(scheduler_.tasks()[0].launches, 1);

  // A new agent takes the pending tasks; the held one, with free cores of its own, none.
  addAgent("b", 1);
  auto placed = launches(pending_);
  ASSERT_EQ(placed.size(), 1u);
  EXPECT_EQ(placed[0].agent_id, "b");
  Actions next;
  scheduler_.onStatusUpdate("b", status(placed[0], TaskState::kFinished), now_, next);
  ASSERT_EQ(launches(next).size(), 1u);
  EXPECT_EQ(launches(next)[0].agent_id, "b");
}

TEST_F(ResumeTest, ATaskThatFitsOnlyTheHeldAgentWaitsForIt) {
  addResumingAgent("a", 1);
  Actions away;
  ASSERT_TRUE(scheduler_.disconnectAgent("a", "gone", now_, away));
  Actions out;
  scheduler_.submit(job({task("t")}), now_, out);
  EXPECT_TRUE(launches(out).empty());

  Actions back;
  auto accepted = scheduler_.resumeAgent(resumeOf("a"), now_, back);
  ASSERT_TRUE(accepted.ok()) << accepted.error().message;
  EXPECT_TRUE(accepted->tasks.empty());
  ASSERT_EQ(launches(back).size(), 1u) << "back in placement at once";
  EXPECT_EQ(launches(back)[0].agent_id, "a");
}

TEST_F(ResumeTest, ReadersAreNotSentToAHeldAgentsBlocksNorIsItAPeer) {
  addResumingAgent("a", 1);
  addBlockAgent("b", 1);
  Actions out;
  scheduler_.submit(twoStage(), now_, out);
  const Action* m0 = launchOf(out, "map-0");
  const Action* m1 = launchOf(out, "map-1");
  ASSERT_NE(m0, nullptr);
  ASSERT_NE(m1, nullptr);
  ASSERT_EQ(m0->agent_id, "a");
  ASSERT_EQ(m1->agent_id, "b");
  Actions step;
  report("a", {block("b0", "a")}, {}, step);
  scheduler_.onStatusUpdate("a", status(*m0, TaskState::kFinished), now_, step);
  EXPECT_EQ(launchOf(step, "reduce"), nullptr);

  ASSERT_TRUE(scheduler_.disconnectAgent("a", "gone", now_, step));
  EXPECT_TRUE(scheduler_.peersFor("b").empty()) << "a held agent takes no migrated blocks";
  Actions ready;
  report("b", {block("b1", "b")}, {}, ready);
  scheduler_.onStatusUpdate("b", status(*m1, TaskState::kFinished), now_, ready);
  EXPECT_EQ(launchOf(ready, "reduce"), nullptr) << "b0 is only on the held agent";
  EXPECT_EQ(scheduler_.progress().waiting_for_inputs, 1u);
  EXPECT_EQ(scheduler_.progress().reruns_for_lost_blocks, 0u) << "held, not lost";

  // Back with b0: the reader goes, reading b0 from a.
  Actions back;
  ASSERT_TRUE(scheduler_.resumeAgent(resumeOf("a", {block("b0", "a")}), now_, back).ok());
  const Action* reduce = launchOf(back, "reduce");
  ASSERT_NE(reduce, nullptr);
  ASSERT_EQ(reduce->task.inputs.size(), 2u);
  EXPECT_EQ(reduce->task.inputs[0].url, urlOf("a", "b0"));
  EXPECT_EQ(scheduler_.peersFor("b").size(), 1u);
}

TEST_F(ResumeTest, ResumeListsTheRunningTasksAndABlockNotListedIsLost) {
  addResumingAgent("a", 2);
  Actions out;
  scheduler_.submit(twoStage(), now_, out);
  const Action* m0 = launchOf(out, "map-0");
  const Action* m1 = launchOf(out, "map-1");
  ASSERT_NE(m0, nullptr);
  ASSERT_NE(m1, nullptr);
  Actions step;
  report("a", {block("b0", "a")}, {}, step);
  scheduler_.onStatusUpdate("a", status(*m0, TaskState::kFinished), now_, step);
  ASSERT_TRUE(launches(step).empty()) << "the reduce waits for b1";
  ASSERT_TRUE(scheduler_.disconnectAgent("a", "gone", now_, step));

  // It comes back running map-1 but without b0 (its disk was wiped, say).
  now_ += seconds(5);
  Actions back;
  auto accepted = scheduler_.resumeAgent(resumeOf("a"), now_, back);
  ASSERT_TRUE(accepted.ok()) << accepted.error().message;
  EXPECT_EQ(accepted->tasks, std::vector<std::uint64_t>{m1->task.task_id});
  EXPECT_EQ(scheduler_.blocks().find("b0"), nullptr);
  EXPECT_EQ(scheduler_.progress().reruns_for_lost_blocks, 1u);
  const Action* rerun = launchOf(back, "map-0");
  ASSERT_NE(rerun, nullptr) << "map-0 writes b0 again, on the free core";
  EXPECT_EQ(rerun->agent_id, "a");
  const AgentInfo* a = scheduler_.agent("a");
  EXPECT_FALSE(a->disconnected_since.has_value());
  EXPECT_EQ(a->last_seen, now_);
  EXPECT_EQ(reportedState(*a), "active");

  // Its accounting is whole: map-1 ends, the reduce runs once both blocks are there.
  Actions rest;
  report("a", {block("b0", "a"), block("b1", "a")}, {}, rest);
  scheduler_.onStatusUpdate("a", status(*m1, TaskState::kFinished), now_, rest);
  scheduler_.onStatusUpdate("a", status(*rerun, TaskState::kFinished), now_, rest);
  const Action* reduce = launchOf(rest, "reduce");
  ASSERT_NE(reduce, nullptr);
  scheduler_.onStatusUpdate("a", status(*reduce, TaskState::kFinished), now_, rest);
  EXPECT_EQ(scheduler_.jobState(), JobState::kSucceeded);
  EXPECT_EQ(scheduler_.tasks()[1].failures + scheduler_.tasks()[1].launches, 1);
}

TEST_F(ResumeTest, BlocksItListsAreRecordedOnlyAsItsOwn) {
  addResumingAgent("a", 1);
  Actions step;
  ASSERT_TRUE(scheduler_.disconnectAgent("a", "gone", now_, step));
  Actions back;
  ASSERT_TRUE(
      scheduler_.resumeAgent(resumeOf("a", {block("x0", "a"), block("x1", "b")}), now_, back).ok());
  ASSERT_NE(scheduler_.blocks().find("x0"), nullptr);
  EXPECT_EQ(scheduler_.blocks().at("x0").holders.at("a"), urlOf("a", "x0"));
  EXPECT_EQ(scheduler_.blocks().find("x1"), nullptr) << "a names a block of another holder";
}

TEST_F(ResumeTest, KillsAskedForWhileAwayAreSentAgain) {
  addResumingAgent("a", 1);
  Actions out;
  scheduler_.submit(job({task("t0"), task("t1")}), now_, out);
  ASSERT_EQ(launches(out).size(), 1u);
  const std::uint64_t id = launches(out)[0].task.task_id;
  Actions step;
  ASSERT_TRUE(scheduler_.disconnectAgent("a", "gone", now_, step));
  Actions cancelled;
  scheduler_.cancel("stopped by the user", cancelled);
  ASSERT_EQ(kills(cancelled).size(), 1u);  // queued to a connection that is not there

  Actions back;
  auto accepted = scheduler_.resumeAgent(resumeOf("a"), now_, back);
  ASSERT_TRUE(accepted.ok());
  EXPECT_EQ(accepted->tasks, std::vector<std::uint64_t>{id}) << "killed, not ended yet";
  auto again = kills(back);
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].agent_id, "a");
  EXPECT_EQ(again[0].task_id, id);
  EXPECT_EQ(again[0].reason, "job failed: stopped by the user");
  EXPECT_TRUE(launches(back).empty()) << "the job is over";
}

TEST_F(ResumeTest, PastTheGraceWindowItIsLostAndItsTasksMoveWithoutAnAttempt) {
  addResumingAgent("a", 1);
  Actions out;
  scheduler_.submit(job({task("t")}), now_, out);
  ASSERT_EQ(launches(out).size(), 1u);
  Actions step;
  ASSERT_TRUE(scheduler_.disconnectAgent("a", "gone", now_, step));
  addAgent("b", 1);
  EXPECT_TRUE(launches(pending_).empty()) << "t is held on a";

  // Silence does not judge a held agent: agent_timeout (60 s) is not its clock.
  Actions none;
  EXPECT_TRUE(scheduler_.expireSilentAgents(now_ + seconds(29), none).empty());
  EXPECT_TRUE(scheduler_.expireDisconnected(now_ + seconds(29), none).empty());
  EXPECT_TRUE(none.empty());

  now_ += seconds(31);
  scheduler_.touch("b", now_);
  Actions expired;
  EXPECT_EQ(scheduler_.expireDisconnected(now_, expired), std::vector<std::string>{"a"});
  EXPECT_EQ(scheduler_.agent("a"), nullptr);
  auto moved = launches(expired);
  ASSERT_EQ(moved.size(), 1u);
  EXPECT_EQ(moved[0].agent_id, "b");
  EXPECT_EQ(scheduler_.tasks()[0].failures, 0);
  EXPECT_EQ(scheduler_.progress().relaunches_after_loss, 1u);
  EXPECT_NE(scheduler_.tasks()[0].reason.find("not back within 30000 ms"), std::string::npos)
      << scheduler_.tasks()[0].reason;

  // Too late: refused, and the late agent's word about t counts for nothing.
  Actions late;
  auto refused = scheduler_.resumeAgent(resumeOf("a"), now_, late);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, "not_resumable");
  EXPECT_NE(refused.error().message.find("'a'"), std::string::npos);
  scheduler_.onStatusUpdate("a", status(launches(out)[0], TaskState::kFinished), now_, late);
  EXPECT_EQ(scheduler_.strayUpdates(), 1u);
  EXPECT_EQ(scheduler_.progress().finished, 0u);
}

TEST_F(ResumeTest, ResumeIsRefusedForAnUnknownOrAConnectedAgent) {
  addResumingAgent("a", 1);
  Actions out;
  auto unknown = scheduler_.resumeAgent(resumeOf("nobody"), now_, out);
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.error().code, "not_resumable");
  EXPECT_NE(unknown.error().message.find("'nobody'"), std::string::npos);

  auto connected = scheduler_.resumeAgent(resumeOf("a"), now_, out);
  ASSERT_FALSE(connected.ok());
  EXPECT_EQ(connected.error().code, "not_resumable");
  EXPECT_NE(connected.error().message.find("still connected"), std::string::npos);
  EXPECT_TRUE(out.empty());
}

TEST_F(ResumeTest, AnAgentWithoutResumesIsNotHeld) {
  addBlockAgent("plain", 1);
  Actions out;
  scheduler_.submit(job({task("t")}), now_, out);
  EXPECT_FALSE(scheduler_.disconnectAgent("plain", "gone", now_, out));
  EXPECT_FALSE(scheduler_.disconnectAgent("nobody", "gone", now_, out));
  EXPECT_FALSE(scheduler_.agent("plain")->disconnected_since.has_value());
  // The caller then removes it, as before resuming existed: t waits for another agent.
  Actions lost;
  EXPECT_TRUE(scheduler_.removeAgent("plain", "connection closed", lost));
  EXPECT_EQ(scheduler_.progress().pending, 1u);
}

TEST_F(ResumeTest, NobodyIsHeldWithAZeroGraceWindow) {
  scheduler_ = Scheduler(SchedulerOptions{4, Millis(60000), 0, Millis(0)});
  addResumingAgent("a", 1);
  Actions out;
  EXPECT_FALSE(scheduler_.disconnectAgent("a", "gone", now_, out));
}

TEST_F(ResumeTest, ASilentResumingAgentIsHeldAndItsConnectionClosed) {
  addResumingAgent("a", 1);
  Actions out;
  scheduler_.submit(job({task("t")}), now_, out);
  ASSERT_EQ(launches(out).size(), 1u);
  now_ += seconds(61);
  Actions expired;
  EXPECT_EQ(scheduler_.expireSilentAgents(now_, expired), std::vector<std::string>{"a"});
  ASSERT_EQ(expired.size(), 1u);
  EXPECT_EQ(expired[0].kind, Action::Kind::kDisconnect) << "its connection is closed";
  const AgentInfo* a = scheduler_.agent("a");
  ASSERT_NE(a, nullptr) << "held, not lost";
  EXPECT_EQ(a->disconnected_since, now_);
  EXPECT_EQ(scheduler_.progress().running, 1u);
  Actions again;
  EXPECT_TRUE(scheduler_.expireSilentAgents(now_ + seconds(10), again).empty());
  EXPECT_EQ(scheduler_.expireDisconnected(now_ + seconds(31), again),
            std::vector<std::string>{"a"});
}

TEST_F(ResumeTest, AHeldAgentThatHadNotLaunchedResumesActive) {
  addResumingAgent("a", 1, /*launched=*/false);
  Actions out;
  ASSERT_TRUE(scheduler_.disconnectAgent("a", "gone", now_, out));
  scheduler_.submit(job({task("t")}), now_, out);
  ASSERT_TRUE(launches(out).empty());
  Actions back;
  ASSERT_TRUE(scheduler_.resumeAgent(resumeOf("a"), now_, back).ok());
  EXPECT_EQ(scheduler_.agent("a")->state, AgentState::kActive);
  ASSERT_EQ(launches(back).size(), 1u);
  EXPECT_EQ(launches(back)[0].agent_id, "a");
}

TEST_F(ResumeTest, AHeldDecommissioningAgentResumesDecommissioning) {
  addResumingAgent("a", 1);
  ASSERT_TRUE(scheduler_.decommissionAgent("a"));
  Actions out;
  ASSERT_TRUE(scheduler_.disconnectAgent("a", "gone", now_, out));
  Actions back;
  ASSERT_TRUE(scheduler_.resumeAgent(resumeOf("a"), now_, back).ok());
  EXPECT_EQ(reportedState(*scheduler_.agent("a")), "decommissioning");
  scheduler_.submit(job({task("t")}), now_, back);
  EXPECT_TRUE(launches(back).empty()) << "still takes no tasks";
}

}  // namespace
}  // namespace dockhand::driver
