// launch_ahead: tasks sent beyond an agent's free cores, a fixed number of cores' worth or, under
// "auto", its cores' worth while the job's tasks prove short.
#include <gtest/gtest.h>

#include "dockhand/driver/scheduler.h"
#include "scheduler_fixture.h"

namespace dockhand::driver {
namespace {

using namespace scheduler_fixture;  // NOLINT(google-build-using-namespace)

// An agent that holds tasks beyond its cores (as every dockhand agent says it does).
void addWaitingAgent(Scheduler& scheduler, const std::string& id, int cores, TimePoint now) {
  Actions out;
  protocol::RegisterExecutor reg = agentReg(id, cores);
  reg.waits_for_cores = true;
  ASSERT_TRUE(scheduler.registerAgent(reg, now, out).ok());
  ASSERT_TRUE(scheduler.agentLaunched(id, now, out));
}

// A number: each agent is sent that many cores' worth of tasks beyond its free cores.
class LaunchAheadTest : public SchedulerTest {
 protected:
  LaunchAheadTest() { scheduler_ = Scheduler(SchedulerOptions{4, Millis(60000), 2}); }
  void addWaitingAgent(const std::string& id, int cores) {
    driver::addWaitingAgent(scheduler_, id, cores, now_);
  }
};

TEST_F(LaunchAheadTest, SendsTasksBeyondTheFreeCoresAndOneMoreForEachThatEnds) {
  addWaitingAgent("a", 2);
  Actions out;
  scheduler_.submit(job({task("t0"), task("t1"), task("t2"), task("t3"), task("t4")}), now_, out);
  auto first = launches(out);
  ASSERT_EQ(first.size(), 4u) << "2 cores + 2 ahead";
  EXPECT_FALSE(first[0].ahead);
  EXPECT_FALSE(first[1].ahead);
  EXPECT_TRUE(first[2].ahead) << "beyond the free cores: it waits on the agent";
  EXPECT_TRUE(first[3].ahead);
  Actions next;
  scheduler_.onStatusUpdate("a", status(first[0], TaskState::kFinished), now_, next);
  ASSERT_EQ(launches(next).size(), 1u);
  EXPECT_EQ(launches(next)[0].task.name, "t4");
}

TEST_F(LaunchAheadTest, AnAgentThatDoesNotWaitForCoresGetsOnlyWhatFits) {
  addAgent("old", 2);  // registered without waits_for_cores: it would run everything at once
  Actions out;
  scheduler_.submit(job({task("t0"), task("t1"), task("t2")}), now_, out);
  EXPECT_EQ(launches(out).size(), 2u);
  EXPECT_EQ(scheduler_.agent("old")->free_cores, 0);
}

TEST_F(LaunchAheadTest, NeverSendsATaskLargerThanTheAgent) {
  addWaitingAgent("a", 2);
  Actions out;
  scheduler_.submit(job({task("big", 3)}), now_, out);
  EXPECT_TRUE(launches(out).empty()) << "3 cpus fit in 2 cores + 2 ahead, but not in the agent";
  ASSERT_TRUE(scheduler_.unschedulableReason().has_value());
}

TEST_F(LaunchAheadTest, SpreadsOverAgentsBeforeSendingAhead) {
  addWaitingAgent("a", 2);
  addWaitingAgent("b", 2);
  Actions out;
  scheduler_.submit(job({task("t0"), task("t1"), task("t2"), task("t3")}), now_, out);
  std::map<std::string, int> per_agent;
  for (const auto& l : launches(out)) ++per_agent[l.agent_id];
  EXPECT_EQ(per_agent["a"], 2);
  EXPECT_EQ(per_agent["b"], 2);
}

TEST_F(LaunchAheadTest, AnOwnFreeCoreComesBeforeAPlaceAhead) {
  addWaitingAgent("a", 2);  // 2 free cores and 2 places ahead
  addAgent("b", 2);         // 2 free cores, no place ahead: it would run them all at once
  Actions out;
  scheduler_.submit(job({task("t0"), task("t1"), task("t2"), task("t3")}), now_, out);
  std::map<std::string, int> per_agent;
  for (const auto& l : launches(out)) {
    ++per_agent[l.agent_id];
    EXPECT_FALSE(l.ahead) << l.task.name << " waits on " << l.agent_id << " while b has a core";
  }
  EXPECT_EQ(per_agent["a"], 2);
  EXPECT_EQ(per_agent["b"], 2);
}

// At a job's tail, tasks waiting on an agent whose cores are busy are recalled for the free
// cores of another: a kill the agent answers KILLED, then a launch elsewhere, no attempt lost.
class RecallTest : public LaunchAheadTest {
 protected:
  // Launch l's agent says `state`; returns the actions that followed.
  Actions say(const Action& l, TaskState state) {
    Actions out;
    scheduler_.onStatusUpdate(l.agent_id, status(l, state), now_, out);
    return out;
  }
  // a (1 core) and b (1 core), four tasks: two on each, one running and one waiting; the
  // launches by agent, in order.
  std::map<std::string, std::vector<Action>> twoOnEachOfTwoAgents() {
    addWaitingAgent("a", 1);
    addWaitingAgent("b", 1);
    Actions out;
    scheduler_.submit(job({task("t0"), task("t1"), task("t2"), task("t3")}), now_, out);
    std::map<std::string, std::vector<Action>> on;
    for (const auto& l : launches(out)) on[l.agent_id].push_back(l);
    return on;
  }
  static std::vector<Action> recalls(const Actions& out) {
    std::vector<Action> kills;
    for (const auto& a : out) {
      if (a.kind == Action::Kind::kKill) kills.push_back(a);
    }
    return kills;
  }
};

TEST_F(RecallTest, TasksWaitingBehindBusyCoresMoveToAnAgentThatRanOutOfWork) {
  addWaitingAgent("a", 2);
  addWaitingAgent("b", 2);
  Actions out;
  scheduler_.submit(job({task("t0"), task("t1"), task("t2"), task("t3"), task("t4"), task("t5"),
                         task("t6"), task("t7")}),
                    now_, out);
  std::map<std::string, std::vector<Action>> on;
  for (const auto& l : launches(out)) on[l.agent_id].push_back(l);
  ASSERT_EQ(on["a"].size(), 4u) << "2 running, 2 waiting";
  ASSERT_EQ(on["b"].size(), 4u);
  for (const auto& l : on["a"]) {
    if (!l.ahead) say(l, TaskState::kRunning);  // a's two long tasks started
  }
  // b runs all four of its tasks; nothing is pending, so once b has a core of its own free,
  // a task that waits on a comes back for it.
  for (std::size_t i = 0; i < 2; ++i) {
    say(on["b"][i], TaskState::kRunning);
    EXPECT_TRUE(recalls(say(on["b"][i], TaskState::kFinished)).empty()) << "b is still busy";
  }
  say(on["b"][2], TaskState::kRunning);
  auto first = recalls(say(on["b"][2], TaskState::kFinished));
  ASSERT_EQ(first.size(), 1u) << "one core of b is free";
  EXPECT_TRUE(first[0].recall);
  EXPECT_EQ(first[0].agent_id, "a");
  EXPECT_EQ(first[0].task_id, on["a"][3].task.task_id) << "the last sent comes back first";
  say(on["b"][3], TaskState::kRunning);
  auto second = recalls(say(on["b"][3], TaskState::kFinished));
  ASSERT_EQ(second.size(), 1u) << "b's other core: the other waiting task";
  EXPECT_EQ(second[0].task_id, on["a"][2].task.task_id);

  // a answers KILLED: each runs again on b, and no attempt is counted against it.
  for (const auto& kill : {first[0], second[0]}) {
    Action back;
    back.agent_id = "a";
    back.task.task_id = kill.task_id;
    auto again = launches(say(back, TaskState::kKilled));
    ASSERT_EQ(again.size(), 1u);
    EXPECT_EQ(again[0].agent_id, "b");
  }
  const Progress p = scheduler_.progress();
  EXPECT_EQ(p.recalled, 2u);
  EXPECT_EQ(p.retries, 0u);
  for (const auto& t : scheduler_.tasks()) EXPECT_EQ(t.failures, 0) << t.spec.name;
}

TEST_F(RecallTest, ATaskThatSaidRunningIsNotRecalled) {
  auto on = twoOnEachOfTwoAgents();
  ASSERT_EQ(on["a"].size(), 2u);
  say(on["a"][0], TaskState::kRunning);
  say(on["a"][1], TaskState::kRunning);  // the one sent ahead has started too
  say(on["b"][0], TaskState::kFinished);
  EXPECT_TRUE(recalls(say(on["b"][1], TaskState::kFinished)).empty());
}

TEST_F(RecallTest, ARecalledTaskThatFinishedBeforeTheKillCountsAsFinished) {
  auto on = twoOnEachOfTwoAgents();
  ASSERT_EQ(on["a"].size(), 2u);
  say(on["a"][0], TaskState::kRunning);
  say(on["b"][0], TaskState::kFinished);
  auto kills = recalls(say(on["b"][1], TaskState::kFinished));
  ASSERT_EQ(kills.size(), 1u);
  EXPECT_EQ(kills[0].task_id, on["a"][1].task.task_id);
  // The kill crossed its end: a ran it meanwhile.
  EXPECT_TRUE(launches(say(on["a"][1], TaskState::kFinished)).empty()) << "not run again";
  say(on["a"][0], TaskState::kFinished);
  EXPECT_EQ(scheduler_.jobState(), JobState::kSucceeded);
  EXPECT_EQ(scheduler_.progress().finished, 4u);
}

// "auto": nothing ahead until kProvenShortTasks ended tasks in a row ran at most kShortTaskMs.
class AutoLaunchAheadTest : public SchedulerTest {
 protected:
  AutoLaunchAheadTest() {
    scheduler_ = Scheduler(SchedulerOptions{4, Millis(60000), defaults::kLaunchAheadAuto});
  }
  void addWaitingAgent(const std::string& id, int cores) {
    driver::addWaitingAgent(scheduler_, id, cores, now_);
  }
  static JobSpec manyTasks(std::size_t n) {
    std::vector<TaskSpec> tasks;
    for (std::size_t i = 0; i < n; ++i) tasks.push_back(task("t" + std::to_string(i)));
    return job(std::move(tasks));
  }
  // Ends launch `l` as FINISHED after `run_ms` as its agent measured it (none: not measured),
  // and returns the launches that followed.
  std::vector<Action> finish(const Action& l, std::optional<std::uint64_t> run_ms) {
    protocol::StatusUpdate update = status(l, TaskState::kFinished);
    update.metrics.run_time_ms = run_ms;
    Actions out;
    scheduler_.onStatusUpdate(l.agent_id, update, now_, out);
    return launches(out);
  }
  // Submits a job of `n` tasks; returns its first launches, oldest first.
  std::deque<Action> submitTasks(std::size_t n) {
    Actions out;
    scheduler_.submit(manyTasks(n), now_, out);
    auto first = launches(out);
    return {first.begin(), first.end()};
  }
  // Ends the oldest of `in_flight` and appends what followed; returns how many followed.
  std::size_t finishOldest(std::deque<Action>& in_flight, std::optional<std::uint64_t> run_ms) {
    Action oldest = in_flight.front();
    in_flight.pop_front();
    auto next = finish(oldest, run_ms);
    in_flight.insert(in_flight.end(), next.begin(), next.end());
    return next.size();
  }
};

TEST_F(AutoLaunchAheadTest, SendsAheadOnceTheJobsTasksProveShortAndStopsAtALongOne) {
  addWaitingAgent("a", 2);
  std::deque<Action> in_flight = submitTasks(100);
  ASSERT_EQ(in_flight.size(), 2u) << "nothing is proven yet: free cores only";
  for (std::size_t i = 1; i < kProvenShortTasks; ++i) {
    ASSERT_EQ(finishOldest(in_flight, 1), 1u) << "short task " << i << " of too few so far";
  }
  EXPECT_EQ(scheduler_.agent("a")->ahead, 0);
  EXPECT_EQ(finishOldest(in_flight, 0), 3u) << "proven: its own core back plus 2 ahead";
  EXPECT_EQ(scheduler_.agent("a")->ahead, 2);
  EXPECT_EQ(in_flight.size(), 4u);
  EXPECT_EQ(finishOldest(in_flight, 1), 1u) << "still short: one out, one in";

  // One task that ran longer: nothing more is sent ahead; the ones already sent stay.
  EXPECT_EQ(finishOldest(in_flight, kShortTaskMs + 1), 0u);
  EXPECT_EQ(scheduler_.agent("a")->ahead, 0);
  EXPECT_EQ(in_flight.size(), 3u);
  EXPECT_EQ(finishOldest(in_flight, 0), 0u) << "3 sent, 2 cores: one still waits";
  EXPECT_EQ(finishOldest(in_flight, 0), 1u) << "a core is free: one goes";
  EXPECT_EQ(in_flight.size(), 2u);
}

TEST_F(AutoLaunchAheadTest, TasksUnderAMillisecondAreSentFurtherAhead) {
  addWaitingAgent("a", 2);
  std::deque<Action> in_flight = submitTasks(200);
  for (std::size_t i = 1; i < kProvenShortTasks; ++i) finishOldest(in_flight, 0);
  EXPECT_EQ(scheduler_.agent("a")->ahead, 0) << "too few so far";
  EXPECT_EQ(finishOldest(in_flight, 0), 1u + 2 * kSubMillisecondAheadPerCore);
  EXPECT_EQ(scheduler_.agent("a")->ahead, 2 * kSubMillisecondAheadPerCore);
  EXPECT_EQ(in_flight.size(), 2u + 2u * kSubMillisecondAheadPerCore);

  // A task of a millisecond: still short, sent ahead its cores' worth only; those sent stay.
  EXPECT_EQ(finishOldest(in_flight, 1), 0u);
  EXPECT_EQ(scheduler_.agent("a")->ahead, 2);
  const std::size_t sent = in_flight.size();
  while (in_flight.size() > 4) ASSERT_EQ(finishOldest(in_flight, 1), 0u);
  EXPECT_EQ(finishOldest(in_flight, 1), 1u) << "down to 2 cores + 2 ahead: one out, one in";
  EXPECT_LT(in_flight.size(), sent);
}

TEST_F(AutoLaunchAheadTest, UnmeasuredTasksProveNothing) {
  addWaitingAgent("a", 2);
  std::deque<Action> in_flight = submitTasks(60);
  for (std::size_t i = 0; i < 2 * kProvenShortTasks; ++i) {
    ASSERT_EQ(finishOldest(in_flight, std::nullopt), 1u);
  }
  EXPECT_EQ(scheduler_.agent("a")->ahead, 0);
  EXPECT_EQ(in_flight.size(), 2u);
}

TEST_F(AutoLaunchAheadTest, AnAgentThatDoesNotWaitForCoresIsNeverSentAhead) {
  addAgent("old", 2);
  std::deque<Action> in_flight = submitTasks(60);
  for (std::size_t i = 0; i < 2 * kProvenShortTasks; ++i) {
    ASSERT_EQ(finishOldest(in_flight, 0), 1u);
  }
  EXPECT_EQ(scheduler_.agent("old")->ahead, 0);
  EXPECT_EQ(scheduler_.agent("old")->free_cores, 0);
}

TEST_F(AutoLaunchAheadTest, AnAgentThatJoinsAfterTheProofIsSentAheadAndANewJobStartsUnproven) {
  addWaitingAgent("a", 1);
  std::deque<Action> in_flight = submitTasks(kProvenShortTasks + 1);
  while (!in_flight.empty()) finishOldest(in_flight, 1);
  ASSERT_EQ(scheduler_.jobState(), JobState::kSucceeded);
  addWaitingAgent("b", 3);
  EXPECT_EQ(scheduler_.agent("b")->ahead, 3) << "the finished job proved its tasks short";
  EXPECT_EQ(scheduler_.agent("b")->free_cores, 6);

  Actions next;
  scheduler_.submit(manyTasks(10), now_, next);
  EXPECT_EQ(scheduler_.agent("a")->ahead, 0);
  EXPECT_EQ(scheduler_.agent("b")->ahead, 0);
  EXPECT_EQ(launches(next).size(), 4u) << "1 + 3 free cores, nothing ahead";
}

}  // namespace
}  // namespace dockhand::driver
