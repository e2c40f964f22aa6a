#include "dockhand/driver/scheduler.h"

#include <set>

#include <gtest/gtest.h>

#include "scheduler_fixture.h"

namespace dockhand::driver {
namespace {

using namespace scheduler_fixture;  // NOLINT(google-build-using-namespace)

TEST_F(SchedulerTest, LaunchesUpToFreeCoresAndNextWhenASlotFrees) {
  addAgent("a", 2);
  Actions out;
  scheduler_.submit(job({task("t0"), task("t1"), task("t2")}), now_, out);
  auto first = launches(out);
  ASSERT_EQ(first.size(), 2u);
  EXPECT_EQ(scheduler_.agent("a")->free_cores, 0);

  Actions next;
  scheduler_.onStatusUpdate("a", status(first[0], TaskState::kFinished), now_, next);
  auto second = launches(next);
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(second[0].task.name, "t2");
  EXPECT_EQ(scheduler_.agent("a")->free_cores, 0);

  Actions rest;
  scheduler_.onStatusUpdate("a", status(first[1], TaskState::kFinished), now_, rest);
  scheduler_.onStatusUpdate("a", status(second[0], TaskState::kFinished), now_, rest);
  EXPECT_EQ(scheduler_.jobState(), JobState::kSucceeded);
  EXPECT_EQ(scheduler_.agent("a")->free_cores, 2);
  EXPECT_EQ(scheduler_.progress().finished, 3u);
}

TEST_F(SchedulerTest, ATaskSpecIsHeldOnceInItsRecord) {
  addAgent("a", 1);
  Actions out;
  JobSpec submitted = job({task("t0"), task("t1")});
  submitted.tasks[1].outputs = {"rdd_1_1"};
  scheduler_.submit(std::move(submitted), now_, out);
  EXPECT_TRUE(scheduler_.job().tasks.empty()) << "the specs moved into the records";
  EXPECT_EQ(scheduler_.job().name, "test");
  ASSERT_EQ(scheduler_.tasks().size(), 2u);
  EXPECT_EQ(scheduler_.tasks()[0].spec.name, "t0");
  EXPECT_EQ(scheduler_.tasks()[0].spec.payload, Json({{"command", {"/bin/true"}}}));
  EXPECT_EQ(scheduler_.tasks()[1].spec.outputs, std::vector<std::string>{"rdd_1_1"});
  const auto sent = launches(out);
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].task.name, "t0") << "a launch is made from the record's spec";
  EXPECT_EQ(sent[0].task.payload, Json({{"command", {"/bin/true"}}}));
}

TEST_F(SchedulerTest, HeartbeatsDuringAJobRaiseItsAgentPeaks) {
  addAgent("a", 1);
  addAgent("b", 1);
  protocol::AgentMetrics beat;
  beat.rss_bytes = 50;
  beat.tasks_rss_bytes = 500;
  scheduler_.noteAgentMetrics("a", beat);
  EXPECT_TRUE(scheduler_.jobAgentPeaks().empty()) << "no job runs: nothing to count it to";

  Actions out;
  scheduler_.submit(job({task("t0"), task("t1")}), now_, out);
  beat.rss_bytes = 20;
  beat.tasks_rss_bytes = 100;
  beat.peak_tasks_rss_bytes = 300;  // a spike between two beats
  beat.blocks = 2;
  scheduler_.noteAgentMetrics("a", beat);
  beat = {};
  beat.rss_bytes = 10;
  beat.tasks_rss_bytes = 200;
  beat.blocks = 1;
  scheduler_.noteAgentMetrics("a", beat);
  scheduler_.noteAgentMetrics("b", {});  // an agent too old to report
  scheduler_.noteAgentMetrics("nobody", beat);
  ASSERT_EQ(scheduler_.jobAgentPeaks().size(), 1u) << "b reported nothing yet";
  const protocol::AgentMetrics& a = scheduler_.jobAgentPeaks().at("a");
  EXPECT_EQ(a.rss_bytes, 20u);
  EXPECT_EQ(a.tasks_rss_bytes, 300u);
  EXPECT_EQ(a.blocks, 2u);
  EXPECT_FALSE(a.block_bytes);
  EXPECT_EQ(scheduler_.agent("a")->metrics, beat) << "the agent's own figures are its latest";

  for (const auto& l : launches(out)) {
    protocol::StatusUpdate done = status(l, TaskState::kFinished);
    done.metrics.peak_rss_bytes = l.agent_id == "a" ? 250 : 400;  // ended between two beats
    scheduler_.onStatusUpdate(l.agent_id, done, now_, out);
  }
  ASSERT_EQ(scheduler_.jobState(), JobState::kSucceeded);
  EXPECT_EQ(scheduler_.jobAgentPeaks().at("a").tasks_rss_bytes, 300u);
  EXPECT_EQ(scheduler_.jobAgentPeaks().at("b").tasks_rss_bytes, 400u)
      << "an agent's tasks held at least what each of them did";
  beat.tasks_rss_bytes = 9000;
  scheduler_.noteAgentMetrics("a", beat);
  EXPECT_EQ(scheduler_.jobAgentPeaks().at("a").tasks_rss_bytes, 300u) << "the job is over";
  scheduler_.submit(job({task("t2")}), now_, out);
  EXPECT_TRUE(scheduler_.jobAgentPeaks().empty()) << "a new job starts from nothing";
}

TEST(SchedulerStatesTest, EachMachineAllowsOnlyItsMoves) {
  EXPECT_TRUE(canMove(AgentState::kRegistered, AgentState::kActive));
  EXPECT_TRUE(canMove(AgentState::kActive, AgentState::kDecommissioning));
  EXPECT_TRUE(canMove(AgentState::kRegistered, AgentState::kDecommissioning));
  EXPECT_FALSE(canMove(AgentState::kDecommissioning, AgentState::kActive));
  EXPECT_FALSE(canMove(AgentState::kActive, AgentState::kRegistered));

  EXPECT_TRUE(canMove(TaskOutcome::kPending, TaskOutcome::kRunning));
  EXPECT_TRUE(canMove(TaskOutcome::kRunning, TaskOutcome::kPending)) << "a retry";
  EXPECT_TRUE(canMove(TaskOutcome::kFinished, TaskOutcome::kPending)) << "its block was lost";
  EXPECT_TRUE(canMove(TaskOutcome::kKilled, TaskOutcome::kFinished)) << "it beat the kill";
  EXPECT_TRUE(canMove(TaskOutcome::kPending, TaskOutcome::kCancelled));
  EXPECT_FALSE(canMove(TaskOutcome::kPending, TaskOutcome::kFinished)) << "never ran";
  EXPECT_FALSE(canMove(TaskOutcome::kCancelled, TaskOutcome::kRunning));
  EXPECT_FALSE(canMove(TaskOutcome::kFailed, TaskOutcome::kPending));
  EXPECT_FALSE(canMove(TaskOutcome::kFinished, TaskOutcome::kFailed));

  EXPECT_TRUE(canMove(JobState::kNone, JobState::kRunning));
  EXPECT_TRUE(canMove(JobState::kFailed, JobState::kRunning)) << "the next job";
  EXPECT_TRUE(canMove(JobState::kRunning, JobState::kSucceeded));
  EXPECT_FALSE(canMove(JobState::kRunning, JobState::kRunning));
  EXPECT_FALSE(canMove(JobState::kSucceeded, JobState::kFailed));
}

TEST_F(SchedulerTest, ARetriedTaskKeepsItsEarlierAttemptsForTheTimeline) {
  addAgent("a", 1);
  Actions out;
  scheduler_.submit(job({task("t0")}), now_, out);
  auto first = launches(out);
  ASSERT_EQ(first.size(), 1u);
  now_ += std::chrono::milliseconds(30);
  Actions next;
  scheduler_.onStatusUpdate("a", status(first[0], TaskState::kFailed), now_, next);
  auto second = launches(next);
  ASSERT_EQ(second.size(), 1u);
  const TaskRecord& t = scheduler_.tasks().at(0);
  ASSERT_EQ(t.earlier.size(), 1u);
  EXPECT_EQ(t.earlier[0].task_id, first[0].task.task_id);
  EXPECT_EQ(t.earlier[0].agent_id, "a");
  EXPECT_EQ(t.earlier[0].state, "FAILED");
  EXPECT_EQ(t.earlier[0].duration, std::chrono::milliseconds(30));
  EXPECT_EQ(t.task_id, second[0].task.task_id) << "the latest launch is the task's own";

  for (int i = 0; i < 20; ++i) {  // lost again and again: only the last few are kept
    Actions again;
    auto running = launches(next);
    if (running.empty()) break;
    scheduler_.onStatusUpdate("a", status(running[0], TaskState::kLost), now_, again);
    next = again;
  }
  EXPECT_EQ(scheduler_.tasks().at(0).earlier.size(), kMaxEarlierAttempts);
  EXPECT_EQ(scheduler_.tasks().at(0).earlier.back().state, "LOST");
}

TEST_F(SchedulerTest, NoTasksBeforeLaunchedExecutor) {
  Actions out;
  ASSERT_TRUE(scheduler_.registerAgent(agentReg("a", 4), now_, out).ok());
  scheduler_.submit(job({task("t0")}), now_, out);
  EXPECT_TRUE(launches(out).empty());
  scheduler_.agentLaunched("a", now_, out);
  EXPECT_EQ(launches(out).size(), 1u);
}

TEST_F(SchedulerTest, MultiCoreTaskWaitsForEnoughCores) {
  addAgent("a", 3);
  Actions out;
  scheduler_.submit(job({task("small", 2), task("big", 3)}), now_, out);
  auto l = launches(out);
  ASSERT_EQ(l.size(), 1u);
  EXPECT_EQ(l[0].task.cpus, 2);
  EXPECT_EQ(scheduler_.agent("a")->free_cores, 1);
  Actions next;
  scheduler_.onStatusUpdate("a", status(l[0], TaskState::kFinished), now_, next);
  ASSERT_EQ(launches(next).size(), 1u);
  EXPECT_EQ(launches(next)[0].task.name, "big");
}

TEST_F(SchedulerTest, AssignsResourceAddressesWithoutOverlap) {
  addAgent("a", 8, {{"gpu", {"0", "1", "2"}}});
  Actions out;
  scheduler_.submit(job({task("g0", 1, {{"gpu", 1}}), task("g1", 1, {{"gpu", 2}}),
                         task("g2", 1, {{"gpu", 1}}), task("cpu", 1)}),
                    now_, out);
  auto l = launches(out);
  // g0 (1 gpu) + g1 (2 gpus) use all three; g2 waits; cpu runs.
  ASSERT_EQ(l.size(), 3u);
  std::set<std::string> used;
  for (const auto& a : l) {
    auto it = a.task.resources.find("gpu");
    if (it == a.task.resources.end()) continue;
    for (const auto& addr : it->second) EXPECT_TRUE(used.insert(addr).second) << addr;
  }
  EXPECT_EQ(used, (std::set<std::string>{"0", "1", "2"}));
  EXPECT_EQ(l[2].task.name, "cpu");

  // g1 finishes: its two addresses come back, g2 gets one of them.
  Actions next;
  scheduler_.onStatusUpdate("a", status(l[1], TaskState::kFinished), now_, next);
  auto l2 = launches(next);
  ASSERT_EQ(l2.size(), 1u);
  EXPECT_EQ(l2[0].task.name, "g2");
  ASSERT_EQ(l2[0].task.resources.at("gpu").size(), 1u);
  const auto& got = l2[0].task.resources.at("gpu")[0];
  EXPECT_TRUE(got == l[1].task.resources.at("gpu")[0] || got == l[1].task.resources.at("gpu")[1]);
  EXPECT_NE(got, l[0].task.resources.at("gpu")[0]);
}

TEST_F(SchedulerTest, FractionalAmountsShareAnAddressExactly) {
  addAgent("a", 16, {{"gpu", {"0", "1"}}});
  Actions out;
  std::vector<TaskSpec> specs;
  specs.reserve(9);
  for (int i = 0; i < 9; ++i) specs.push_back(task("q" + std::to_string(i), 1, {{"gpu", 0.25}}));
  scheduler_.submit(job(specs), now_, out);
  auto l = launches(out);
  // Two GPUs, a quarter each: eight run, four per address; the ninth waits.
  ASSERT_EQ(l.size(), 8u);
  std::map<std::string, int> per_address;
  for (const auto& a : l) {
    ASSERT_EQ(a.task.resources.at("gpu").size(), 1u);
    ++per_address[a.task.resources.at("gpu")[0]];
  }
  EXPECT_EQ(per_address, (std::map<std::string, int>{{"0", 4}, {"1", 4}}));

  // One quarter of GPU 1 comes back: the ninth task takes exactly that share.
  const Action* on_one = nullptr;
  for (const auto& a : l) {
    if (a.task.resources.at("gpu")[0] == "1") on_one = &a;
  }
  ASSERT_NE(on_one, nullptr);
  Actions next;
  scheduler_.onStatusUpdate("a", status(*on_one, TaskState::kFinished), now_, next);
  auto l2 = launches(next);
  ASSERT_EQ(l2.size(), 1u);
  EXPECT_EQ(l2[0].task.name, "q8");
  EXPECT_EQ(l2[0].task.resources.at("gpu"), std::vector<std::string>{"1"});
}

TEST_F(SchedulerTest, FractionsPackSoWholeAddressesStayFree) {
  addAgent("a", 16, {{"gpu", {"0", "1"}}});
  Actions out;
  scheduler_.submit(job({task("third-a", 1, {{"gpu", 0.3}}), task("third-b", 1, {{"gpu", 0.3}}),
                         task("whole", 1, {{"gpu", 1}})}),
                    now_, out);
  auto l = launches(out);
  // floor(1 / 0.3) = 3 shares per address: both fractions go on GPU 0, GPU 1 stays whole.
  ASSERT_EQ(l.size(), 3u);
  EXPECT_EQ(l[0].task.resources.at("gpu"), std::vector<std::string>{"0"});
  EXPECT_EQ(l[1].task.resources.at("gpu"), std::vector<std::string>{"0"});
  EXPECT_EQ(l[2].task.resources.at("gpu"), std::vector<std::string>{"1"});
  EXPECT_EQ(resourceUnitsPerAddress(0.3) * 3, kResourceUnits - kResourceUnits % 3);
  EXPECT_EQ(resourceUnitsPerAddress(0.2), kResourceUnits / 5) << "1 / 0.2 is 5 shares, not 4";
  EXPECT_EQ(resourceUnitsPerAddress(2), kResourceUnits);
  EXPECT_EQ(resourceAddressCount(2), 2);
  EXPECT_EQ(resourceAddressCount(0.5), 1);
}

TEST_F(SchedulerTest, ResourceTaskGoesToTheAgentThatHasTheResource) {
  addAgent("cpu-only", 8);
  addAgent("gpu-box", 1, {{"gpu", {"7"}}});
  Actions out;
  scheduler_.submit(job({task("g", 1, {{"gpu", 1}})}), now_, out);
  auto l = launches(out);
  ASSERT_EQ(l.size(), 1u);
  EXPECT_EQ(l[0].agent_id, "gpu-box");
  EXPECT_EQ(l[0].task.resources.at("gpu"), std::vector<std::string>{"7"});
}

TEST_F(SchedulerTest, EveryLaunchGetsAFreshTaskIdAndAttemptCounts) {
  addAgent("a", 1);
  Actions out;
  scheduler_.submit(job({task("flaky")}, 3), now_, out);
  auto first = launches(out).at(0);
  EXPECT_EQ(first.task.attempt, 0);
  Actions retry;
  scheduler_.onStatusUpdate("a", status(first, TaskState::kFailed), now_, retry);
  auto second = launches(retry).at(0);
  EXPECT_NE(second.task.task_id, first.task.task_id);
  EXPECT_EQ(second.task.attempt, 1);
  EXPECT_EQ(scheduler_.progress().retries, 1u);
  Actions done;
  scheduler_.onStatusUpdate("a", status(second, TaskState::kFinished), now_, done);
  EXPECT_EQ(scheduler_.jobState(), JobState::kSucceeded);
  EXPECT_EQ(scheduler_.tasks()[0].launches, 2);
  EXPECT_EQ(scheduler_.tasks()[0].failures, 1);
}

TEST_F(SchedulerTest, JobFailsAfterMaxAttemptsAndKillsTheOthers) {
  addAgent("a", 2);
  Actions out;
  scheduler_.submit(job({task("bad"), task("slow")}, 2), now_, out);
  auto l = launches(out);
  ASSERT_EQ(l.size(), 2u);
  Action bad = l[0].task.name == "bad" ? l[0] : l[1];
  Action slow = l[0].task.name == "bad" ? l[1] : l[0];

  Actions retry;
  scheduler_.onStatusUpdate("a", status(bad, TaskState::kFailed), now_, retry);
  auto again = launches(retry);
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(scheduler_.jobState(), JobState::kRunning);

  Actions last;
  scheduler_.onStatusUpdate("a", status(again[0], TaskState::kFailed), now_, last);
  EXPECT_EQ(scheduler_.jobState(), JobState::kFailed);
  EXPECT_NE(scheduler_.failureReason().find("'bad' failed 2 time(s)"), std::string::npos)
      << scheduler_.failureReason();
  ASSERT_EQ(last.size(), 1u);
  EXPECT_EQ(last[0].kind, Action::Kind::kKill);
  EXPECT_EQ(last[0].task_id, slow.task.task_id);
  EXPECT_EQ(scheduler_.tasks()[0].outcome, TaskOutcome::kFailed);
  EXPECT_EQ(scheduler_.tasks()[1].outcome, TaskOutcome::kKilled);

  // The killed task's final update frees its core.
  Actions none;
  scheduler_.onStatusUpdate("a", status(slow, TaskState::kKilled), now_, none);
  EXPECT_TRUE(none.empty());
  EXPECT_EQ(scheduler_.agent("a")->free_cores, 2);
}

TEST_F(SchedulerTest, UnrequestedKillCountsAsAFailure) {
  addAgent("a", 1);
  Actions out;
  scheduler_.submit(job({task("t")}, 1), now_, out);
  Actions next;
  scheduler_.onStatusUpdate("a", status(launches(out).at(0), TaskState::kKilled), now_, next);
  EXPECT_EQ(scheduler_.jobState(), JobState::kFailed);
}

TEST_F(SchedulerTest, AgentsCountTheirFinishedAndFailedLaunchesAndKeepTheirLogUrls) {
  Actions out;
  protocol::RegisterExecutor reg = agentReg("a", 2);
  reg.log_urls = {{"stdout", "http://host-a:7337/logs/stdout"}};
  ASSERT_TRUE(scheduler_.registerAgent(reg, now_, out).ok());
  ASSERT_TRUE(scheduler_.agentLaunched("a", now_, out));
  EXPECT_EQ(scheduler_.agent("a")->log_urls, reg.log_urls);
  scheduler_.submit(job({task("ok"), task("flaky"), task("lost")}, 3), now_, out);
  auto first = launches(out);
  ASSERT_EQ(first.size(), 2u);
  Actions next;
  scheduler_.onStatusUpdate("a", status(first[0], TaskState::kFinished), now_, next);
  scheduler_.onStatusUpdate("a", status(first[1], TaskState::kFailed), now_, next);
  auto second = launches(next);
  ASSERT_EQ(second.size(), 2u);
  scheduler_.onStatusUpdate("a", status(second[0], TaskState::kLost), now_, next);
  scheduler_.onStatusUpdate("a", status(second[1], TaskState::kRunning), now_, next);
  const AgentInfo& a = *scheduler_.agent("a");
  EXPECT_EQ(a.tasks_finished, 1u);
  EXPECT_EQ(a.tasks_failed, 2u) << "FAILED and LOST; RUNNING is no end";
  EXPECT_EQ(a.tasks_launched, 5u) << "the lost one went out again";
}

TEST_F(SchedulerTest, LostTaskIsRelaunchedWithoutCountingAnAttempt) {
  addAgent("a", 1);
  Actions out;
  scheduler_.submit(job({task("t")}, 1), now_, out);
  Actions next;
  scheduler_.onStatusUpdate("a", status(launches(out).at(0), TaskState::kLost), now_, next);
  auto again = launches(next);
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].task.attempt, 1);
  EXPECT_EQ(scheduler_.tasks()[0].failures, 0);
  EXPECT_EQ(scheduler_.jobState(), JobState::kRunning);
  EXPECT_EQ(scheduler_.progress().relaunches_after_loss, 1u);
}

TEST_F(SchedulerTest, AgentLossReschedulesItsTasksElsewhereWithoutCountingAttempts) {
  addAgent("a", 1);
  Actions out;
  scheduler_.submit(job({task("t0"), task("t1")}, 1), now_, out);
  ASSERT_EQ(launches(out).size(), 1u);
  EXPECT_EQ(launches(out)[0].agent_id, "a");

  addAgent("b", 2);
  ASSERT_EQ(launches(pending_).size(), 1u);  // t1 went to b on registration
  Actions after_loss;
  EXPECT_TRUE(scheduler_.removeAgent("a", "connection closed", after_loss));
  auto moved = launches(after_loss);
  ASSERT_EQ(moved.size(), 1u);
  EXPECT_EQ(moved[0].agent_id, "b");
  EXPECT_EQ(moved[0].task.name, "t0");
  EXPECT_EQ(scheduler_.tasks()[0].failures, 0);
  EXPECT_EQ(scheduler_.jobState(), JobState::kRunning);
  EXPECT_EQ(scheduler_.agent("a"), nullptr);

  // A late update from the lost agent about the moved task is ignored.
  Actions stray;
  scheduler_.onStatusUpdate("a", status(launches(out)[0], TaskState::kFinished), now_, stray);
  EXPECT_EQ(scheduler_.strayUpdates(), 1u);
  EXPECT_EQ(scheduler_.progress().finished, 0u);
}

TEST_F(SchedulerTest, DuplicateExecutorIdIsRefusedWhileRegistered) {
  addAgent("a", 1);
  Actions out;
  auto again = scheduler_.registerAgent(agentReg("a", 4), now_, out);
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.error().code, "duplicate_executor");
  EXPECT_NE(again.error().message.find("'a'"), std::string::npos);
  EXPECT_EQ(scheduler_.agent("a")->cores, 1);  // the first registration stands

  ASSERT_TRUE(scheduler_.removeAgent("a", "gone", out));
  EXPECT_TRUE(scheduler_.registerAgent(agentReg("a", 4), now_, out).ok());
}

TEST_F(SchedulerTest, SilentAgentExpiresAndItsTasksMove) {
  addAgent("quiet", 1);
  addAgent("chatty", 1);
  Actions out;
  scheduler_.submit(job({task("t0"), task("t1"), task("t2")}), now_, out);
  ASSERT_EQ(launches(out).size(), 2u);

  now_ += std::chrono::seconds(40);
  scheduler_.touch("chatty", now_);
  Actions none;
  EXPECT_TRUE(scheduler_.expireSilentAgents(now_, none).empty());

  now_ += std::chrono::seconds(30);  // quiet: 70 s silent; chatty: 30 s
  Actions expired;
  auto ids = scheduler_.expireSilentAgents(now_, expired);
  EXPECT_EQ(ids, std::vector<std::string>{"quiet"});
  bool disconnected = false;
  for (const auto& a : expired) {
    if (a.kind == Action::Kind::kDisconnect && a.agent_id == "quiet") disconnected = true;
  }
  EXPECT_TRUE(disconnected);
  EXPECT_EQ(scheduler_.agent("quiet"), nullptr);
  EXPECT_EQ(scheduler_.progress().pending, 2u);  // the quiet agent's task waits for chatty
  EXPECT_EQ(scheduler_.tasks()[0].failures + scheduler_.tasks()[1].failures, 0);
}

TEST_F(SchedulerTest, DecommissioningAgentGetsNoNewTasks) {
  addAgent("a", 2);
  Actions out;
  scheduler_.submit(job({task("t0"), task("t1"), task("t2")}), now_, out);
  auto l = launches(out);
  ASSERT_EQ(l.size(), 2u);
  scheduler_.decommissionAgent("a");
  Actions next;
  scheduler_.onStatusUpdate("a", status(l[0], TaskState::kFinished), now_, next);
  EXPECT_TRUE(launches(next).empty());
}

TEST_F(SchedulerTest, ReportsATaskNoAgentCanRun) {
  addAgent("a", 2);
  Actions out;
  scheduler_.submit(job({task("huge", 16)}), now_, out);
  auto why = scheduler_.unschedulableReason();
  ASSERT_TRUE(why.has_value());
  EXPECT_NE(why->find("'huge' needs 16 cpus"), std::string::npos) << *why;
}

TEST_F(SchedulerTest, ManyTasksFlowThroughOneAgent) {
  addAgent("a", 4);
  std::vector<TaskSpec> tasks;
  tasks.reserve(10000);
  for (int i = 0; i < 10000; ++i) {
    std::string name = "t";  // appended, not "t" + ...: GCC 12 warns falsely (-Wrestrict)
    name += std::to_string(i);
    tasks.push_back(task(name));
  }
  Actions out;
  scheduler_.submit(job(std::move(tasks)), now_, out);
  std::deque<Action> running(out.begin(), out.end());
  std::set<std::uint64_t> ids;
  while (!running.empty()) {
    Action a = running.front();
    running.pop_front();
    ASSERT_TRUE(ids.insert(a.task.task_id).second);
    Actions next;
    scheduler_.onStatusUpdate("a", status(a, TaskState::kFinished), now_, next);
    for (auto& n : next) running.push_back(std::move(n));
  }
  EXPECT_EQ(ids.size(), 10000u);
  EXPECT_EQ(scheduler_.jobState(), JobState::kSucceeded);
}

}  // namespace
}  // namespace dockhand::driver
