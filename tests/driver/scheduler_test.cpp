#include "dockhand/driver/scheduler.h"

#include <set>

#include <gtest/gtest.h>

namespace dockhand::driver {
namespace {

using protocol::TaskState;

protocol::RegisterExecutor agentReg(const std::string& id, int cores,
                                    std::map<std::string, std::vector<std::string>> res = {}) {
  protocol::RegisterExecutor r;
  r.executor_id = id;
  r.hostname = "host-" + id;
  r.cores = cores;
  for (auto& [name, addresses] : res) r.resources[name] = protocol::ResourceInfo{name, addresses};
  return r;
}

TaskSpec task(const std::string& name, int cpus = 1, std::map<std::string, double> res = {}) {
  TaskSpec t;
  t.name = name;
  t.cpus = cpus;
  t.resources = std::move(res);
  t.payload = {{"command", {"/bin/true"}}};
  return t;
}

JobSpec job(std::vector<TaskSpec> tasks, int max_attempts = 0) {
  JobSpec j;
  j.name = "test";
  j.max_attempts = max_attempts;
  j.tasks = std::move(tasks);
  return j;
}

std::vector<Action> launches(const Actions& actions) {
  std::vector<Action> out;
  for (const auto& a : actions) {
    if (a.kind == Action::Kind::kLaunch) out.push_back(a);
  }
  return out;
}

protocol::StatusUpdate status(const Action& launch, TaskState state) {
  protocol::StatusUpdate s;
  s.executor_id = launch.agent_id;
  s.task_id = launch.task.task_id;
  s.state = state;
  if (state == TaskState::kFinished) s.result = {{"exit_code", 0}, {"stdout", "1\n"}};
  if (state == TaskState::kFailed) s.reason = "exit code 1";
  return s;
}

class SchedulerTest : public ::testing::Test {
 protected:
  TimePoint now_ = TimePoint{} + std::chrono::hours(1);
  Scheduler scheduler_{SchedulerOptions{4, Millis(60000)}};

  void addAgent(const std::string& id, int cores,
                std::map<std::string, std::vector<std::string>> res = {}) {
    Actions out;
    ASSERT_TRUE(scheduler_.registerAgent(agentReg(id, cores, std::move(res)), now_, out).ok);
    ASSERT_TRUE(scheduler_.agentLaunched(id, now_, out));
    pending_.insert(pending_.end(), out.begin(), out.end());
  }
  Actions pending_;  // actions produced by addAgent
};

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

TEST_F(SchedulerTest, NoTasksBeforeLaunchedExecutor) {
  Actions out;
  ASSERT_TRUE(scheduler_.registerAgent(agentReg("a", 4), now_, out).ok);
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
  EXPECT_FALSE(again.ok);
  EXPECT_EQ(again.code, "duplicate_executor");
  EXPECT_NE(again.message.find("'a'"), std::string::npos);
  EXPECT_EQ(scheduler_.agent("a")->cores, 1);  // the first registration stands

  ASSERT_TRUE(scheduler_.removeAgent("a", "gone", out));
  EXPECT_TRUE(scheduler_.registerAgent(agentReg("a", 4), now_, out).ok);
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
  for (int i = 0; i < 10000; ++i) tasks.push_back(task("t" + std::to_string(i)));
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

// ---- blocks and decommissioning --------------------------------------------------------------

class BlockSchedulingTest : public SchedulerTest {
 protected:
  void addBlockAgent(const std::string& id, int cores) {
    Actions out;
    protocol::RegisterExecutor reg = agentReg(id, cores);
    reg.block_url = "http://" + id + ":7337/";
    ASSERT_TRUE(scheduler_.registerAgent(reg, now_, out).ok);
    ASSERT_TRUE(scheduler_.agentLaunched(id, now_, out));
    pending_.insert(pending_.end(), out.begin(), out.end());
  }
  static std::string urlOf(const std::string& agent, const std::string& block) {
    return "http://" + agent + ":7337/blocks/" + block;
  }
  static protocol::BlockInfo block(const std::string& id, const std::string& holder) {
    protocol::BlockInfo b;
    b.id = id;
    b.size = 42;
    b.checksum = "xxh64:00000000000000aa";
    b.executor_id = holder;
    b.url = holder.empty() ? "fallback:" + id : urlOf(holder, id);
    return b;
  }
  // UpdateBlockInfo from `sender`.
  void report(const std::string& sender, std::vector<protocol::BlockInfo> added,
              std::vector<std::string> removed, Actions& out) {
    protocol::UpdateBlockInfo update;
    update.executor_id = sender;
    update.added = std::move(added);
    update.removed = std::move(removed);
    scheduler_.updateBlocks(sender, update, now_, out);
  }
  static TaskSpec mapTask(const std::string& name, std::vector<std::string> outputs) {
    TaskSpec t = task(name);
    t.outputs = std::move(outputs);
    return t;
  }
  static TaskSpec reduceTask(const std::string& name, std::vector<std::string> inputs) {
    TaskSpec t = task(name);
    t.inputs = std::move(inputs);
    return t;
  }
  // map-0 writes b0, map-1 writes b1, reduce reads both.
  static JobSpec twoStage() {
    return job(
        {mapTask("map-0", {"b0"}), mapTask("map-1", {"b1"}), reduceTask("reduce", {"b0", "b1"})});
  }
  const Action* launchOf(const Actions& actions, const std::string& name) {
    for (const auto& a : actions) {
      if (a.kind == Action::Kind::kLaunch && a.task.name == name) return &a;
    }
    return nullptr;
  }
};

TEST_F(BlockSchedulingTest, TaskWaitsUntilEveryInputHasALocation) {
  addBlockAgent("a", 4);
  Actions out;
  scheduler_.submit(twoStage(), now_, out);
  ASSERT_EQ(launches(out).size(), 2u);  // the maps; the reduce waits for b0 and b1
  EXPECT_EQ(launchOf(out, "reduce"), nullptr);
  EXPECT_EQ(scheduler_.progress().waiting_for_inputs, 1u);

  Actions done;
  scheduler_.onStatusUpdate("a", status(*launchOf(out, "map-0"), TaskState::kFinished), now_, done);
  scheduler_.onStatusUpdate("a", status(*launchOf(out, "map-1"), TaskState::kFinished), now_, done);
  report("a", {block("b0", "a")}, {}, done);
  EXPECT_EQ(launchOf(done, "reduce"), nullptr) << "b1 has no location yet";

  Actions ready;
  report("a", {block("b1", "a")}, {}, ready);
  const Action* reduce = launchOf(ready, "reduce");
  ASSERT_NE(reduce, nullptr);
  ASSERT_EQ(reduce->task.inputs.size(), 2u);
  EXPECT_EQ(reduce->task.inputs[0].id, "b0");
  EXPECT_EQ(reduce->task.inputs[0].url, urlOf("a", "b0"));
  EXPECT_EQ(reduce->task.inputs[0].size, 42u);
  EXPECT_EQ(reduce->task.inputs[0].checksum, "xxh64:00000000000000aa");
  EXPECT_EQ(reduce->task.inputs[1].url, urlOf("a", "b1"));
  EXPECT_EQ(scheduler_.progress().waiting_for_inputs, 0u);
}

TEST_F(BlockSchedulingTest, FallbackBlockIsReadThroughALiveActiveAgentsBlockServer) {
  addBlockAgent("a", 1);
  addBlockAgent("b", 1);
  Actions out;
  report("a", {block("b0", ""), block("b1", "")}, {"b0", "b1"}, out);
  ASSERT_EQ(scheduler_.blocks().heldBy(""), 2u);
  EXPECT_EQ(scheduler_.blocks().heldBy("a"), 0u);
  scheduler_.decommissionAgent("a");

  JobSpec j =
      job({mapTask("map-0", {"b0"}), mapTask("map-1", {"b1"}), reduceTask("reduce", {"b0", "b1"})});
  scheduler_.submit(std::move(j), now_, out);
  // The maps have not run in this job, but their blocks are known already: whichever task
  // fits first runs. Drive until the reduce launches.
  const Action* reduce = launchOf(out, "reduce");
  for (int round = 0; reduce == nullptr && round < 3; ++round) {
    Actions next;
    for (const auto& l : launches(out)) {
      scheduler_.onStatusUpdate(l.agent_id, status(l, TaskState::kFinished), now_, next);
    }
    out = next;
    reduce = launchOf(out, "reduce");
  }
  ASSERT_NE(reduce, nullptr);
  EXPECT_EQ(reduce->agent_id, "b");
  // Not through "a": it is decommissioning.
  EXPECT_EQ(reduce->task.inputs[0].url, "http://b:7337/blocks/b0");
  EXPECT_EQ(reduce->task.inputs[1].url, "http://b:7337/blocks/b1");
}

TEST_F(BlockSchedulingTest, FallbackBlockWaitsWhileNoActiveAgentHasABlockServer) {
  addAgent("plain", 2);  // no block_url
  Actions out;
  report("plain", {block("b0", "")}, {}, out);
  scheduler_.submit(job({mapTask("map-0", {"b0"}), reduceTask("reduce", {"b0"})}), now_, out);
  EXPECT_EQ(launchOf(out, "reduce"), nullptr);
  addBlockAgent("reader", 1);
  // Now the block can be read: the reduce runs (on "plain", which has a core left) and
  // reads b0 through the new agent's block server.
  const Action* reduce = launchOf(pending_, "reduce");
  ASSERT_NE(reduce, nullptr);
  EXPECT_EQ(reduce->task.inputs[0].url, "http://reader:7337/blocks/b0");
}

TEST_F(BlockSchedulingTest, BlockOnADecommissioningAgentIsReadOnlyOnceItMoved) {
  addBlockAgent("a", 2);
  addBlockAgent("b", 1);
  Actions out;
  report("b", {block("b0", "b")}, {}, out);
  scheduler_.decommissionAgent("b");
  scheduler_.submit(job({mapTask("map-0", {"b0"}), reduceTask("reduce", {"b0"})}), now_, out);
  EXPECT_EQ(launchOf(out, "reduce"), nullptr) << "b is leaving: do not race its exit";
  EXPECT_EQ(scheduler_.progress().waiting_for_inputs, 1u);

  // b migrates the block to a and says so.
  Actions moved;
  report("b", {block("b0", "a")}, {"b0"}, moved);
  const Action* reduce = launchOf(moved, "reduce");
  ASSERT_NE(reduce, nullptr);
  EXPECT_EQ(reduce->task.inputs[0].url, urlOf("a", "b0"));
}

TEST_F(BlockSchedulingTest, TargetsOwnCopyIsPreferred) {
  addBlockAgent("a", 1);
  addBlockAgent("b", 2);
  Actions out;
  report("a", {block("b0", "a")}, {}, out);
  report("b", {block("b0", "b")}, {}, out);
  scheduler_.submit(job({mapTask("map-0", {"b0"}), reduceTask("reduce", {"b0"})}), now_, out);
  const Action* reduce = launchOf(out, "reduce");
  ASSERT_NE(reduce, nullptr);
  EXPECT_EQ(reduce->task.inputs[0].url, urlOf(reduce->agent_id, "b0"));
}

TEST_F(BlockSchedulingTest, LostBlockRerunsItsProducerThenTheConsumerProceeds) {
  addBlockAgent("a", 2);
  addBlockAgent("b", 2);
  Actions out;
  scheduler_.submit(twoStage(), now_, out);
  const Action map0 = *launchOf(out, "map-0");
  const Action map1 = *launchOf(out, "map-1");
  Actions step;
  scheduler_.onStatusUpdate(map0.agent_id, status(map0, TaskState::kFinished), now_, step);
  report(map0.agent_id, {block("b0", map0.agent_id)}, {}, step);
  ASSERT_NE(map0.agent_id, map1.agent_id) << "the maps spread over both agents";

  // map-0's agent dies before the reduce could read b0.
  Actions after_loss;
  ASSERT_TRUE(scheduler_.removeAgent(map0.agent_id, "connection closed", after_loss));
  EXPECT_EQ(scheduler_.progress().reruns_for_lost_blocks, 1u);
  const Action* rerun = launchOf(after_loss, "map-0");
  ASSERT_NE(rerun, nullptr) << "map-0 runs again on the surviving agent";
  EXPECT_EQ(rerun->agent_id, map1.agent_id);
  EXPECT_EQ(rerun->task.attempt, 1);

  Actions finish;
  scheduler_.onStatusUpdate(map1.agent_id, status(map1, TaskState::kFinished), now_, finish);
  report(map1.agent_id, {block("b1", map1.agent_id)}, {}, finish);
  scheduler_.onStatusUpdate(rerun->agent_id, status(*rerun, TaskState::kFinished), now_, finish);
  EXPECT_EQ(launchOf(finish, "reduce"), nullptr) << "b0 is not reported again yet";
  report(rerun->agent_id, {block("b0", rerun->agent_id)}, {}, finish);
  const Action* reduce = launchOf(finish, "reduce");
  ASSERT_NE(reduce, nullptr);
  EXPECT_EQ(reduce->task.inputs[0].url, urlOf(map1.agent_id, "b0"));

  Actions end;
  scheduler_.onStatusUpdate(reduce->agent_id, status(*reduce, TaskState::kFinished), now_, end);
  EXPECT_EQ(scheduler_.jobState(), JobState::kSucceeded);
  EXPECT_EQ(scheduler_.progress().finished, 3u);
  EXPECT_EQ(scheduler_.progress().reruns_for_lost_blocks, 1u);
}

TEST_F(BlockSchedulingTest, LostBlockWhoseReadersAllFinishedIsNotRecomputed) {
  addBlockAgent("a", 1);
  addBlockAgent("b", 1);
  Actions out;
  scheduler_.submit(job({mapTask("map-0", {"b0"}), reduceTask("reduce", {"b0"}), task("other")}),
                    now_, out);
  const Action map0 = *launchOf(out, "map-0");
  Actions step;
  scheduler_.onStatusUpdate(map0.agent_id, status(map0, TaskState::kFinished), now_, step);
  report(map0.agent_id, {block("b0", map0.agent_id)}, {}, step);
  const Action* reduce = launchOf(step, "reduce");
  ASSERT_NE(reduce, nullptr);
  const Action reduce_launch = *reduce;
  Actions done;
  scheduler_.onStatusUpdate(reduce_launch.agent_id, status(reduce_launch, TaskState::kFinished),
                            now_, done);
  ASSERT_EQ(scheduler_.jobState(), JobState::kRunning) << "'other' still runs";
  Actions after;
  report(map0.agent_id, {}, {"b0"}, after);
  EXPECT_EQ(scheduler_.progress().reruns_for_lost_blocks, 0u);
  EXPECT_EQ(launchOf(after, "map-0"), nullptr);
}

TEST_F(BlockSchedulingTest, DecommissioningAgentGetsNoTasksAndIsNoPeer) {
  addBlockAgent("a", 2);
  addBlockAgent("b", 2);
  addBlockAgent("c", 2);
  auto peerIds = [&](const std::string& asker) {
    std::vector<std::string> ids;
    for (const auto& p : scheduler_.peersFor(asker)) ids.push_back(p.executor_id);
    return ids;
  };
  EXPECT_EQ(peerIds("a"), (std::vector<std::string>{"b", "c"}));
  ASSERT_EQ(scheduler_.peersFor("a")[0].block_url, "http://b:7337/");

  ASSERT_TRUE(scheduler_.decommissionAgent("a"));
  EXPECT_EQ(scheduler_.agent("a")->state, AgentState::kDecommissioning);
  EXPECT_EQ(peerIds("a"), (std::vector<std::string>{"b", "c"}));
  EXPECT_EQ(peerIds("b"), (std::vector<std::string>{"c"})) << "a is leaving";

  Actions out;
  scheduler_.submit(job({task("t0"), task("t1"), task("t2"), task("t3"), task("t4")}), now_, out);
  auto l = launches(out);
  EXPECT_EQ(l.size(), 4u);
  for (const auto& a : l) EXPECT_NE(a.agent_id, "a");

  // A lost agent is no peer either (it is gone from the registry).
  Actions lost;
  ASSERT_TRUE(scheduler_.removeAgent("c", "connection closed", lost));
  EXPECT_EQ(peerIds("b"), std::vector<std::string>{});
  // An agent without a block server is never offered.
  addAgent("plain", 1);
  EXPECT_EQ(peerIds("b"), std::vector<std::string>{});
}

TEST_F(BlockSchedulingTest, CleanLeaveAfterMigrationReschedulesNothing) {
  addBlockAgent("a", 2);
  addBlockAgent("b", 2);
  Actions out;
  scheduler_.submit(twoStage(), now_, out);
  const Action map0 = *launchOf(out, "map-0");
  const Action map1 = *launchOf(out, "map-1");
  const std::string leaving = map0.agent_id;
  const std::string staying = map1.agent_id;
  ASSERT_NE(leaving, staying);
  scheduler_.decommissionAgent(leaving);

  Actions step;
  scheduler_.onStatusUpdate(leaving, status(map0, TaskState::kFinished), now_, step);
  report(leaving, {block("b0", leaving)}, {}, step);
  // It migrates b0 to the other agent, tells the driver, and leaves.
  report(leaving, {block("b0", staying)}, {"b0"}, step);
  EXPECT_EQ(scheduler_.blocks().heldBy(leaving), 0u);
  Actions left;
  ASSERT_TRUE(scheduler_.removeAgent(leaving, "removed itself: decommission finished", left));
  EXPECT_TRUE(launches(left).empty());
  EXPECT_EQ(scheduler_.progress().reruns_for_lost_blocks, 0u);
  EXPECT_EQ(scheduler_.progress().relaunches_after_loss, 0u);

  Actions finish;
  scheduler_.onStatusUpdate(staying, status(map1, TaskState::kFinished), now_, finish);
  report(staying, {block("b1", staying)}, {}, finish);
  const Action* reduce = launchOf(finish, "reduce");
  ASSERT_NE(reduce, nullptr);
  EXPECT_EQ(reduce->task.inputs[0].url, urlOf(staying, "b0"));
  Actions end;
  scheduler_.onStatusUpdate(staying, status(*reduce, TaskState::kFinished), now_, end);
  EXPECT_EQ(scheduler_.jobState(), JobState::kSucceeded);
  EXPECT_EQ(scheduler_.progress().reruns_for_lost_blocks, 0u);
}

TEST_F(BlockSchedulingTest, FallbackBlocksOutliveTheirWriter) {
  addBlockAgent("a", 1);
  addBlockAgent("b", 1);
  Actions out;
  scheduler_.submit(job({mapTask("map-0", {"b0"}), reduceTask("reduce", {"b0"})}), now_, out);
  const Action map0 = *launchOf(out, "map-0");
  Actions step;
  scheduler_.onStatusUpdate(map0.agent_id, status(map0, TaskState::kFinished), now_, step);
  scheduler_.decommissionAgent(map0.agent_id);
  report(map0.agent_id, {block("b0", "")}, {"b0"}, step);
  Actions left;
  scheduler_.removeAgent(map0.agent_id, "removed itself: decommission finished", left);
  const Action* reduce = launchOf(step, "reduce");
  if (reduce == nullptr) reduce = launchOf(left, "reduce");
  ASSERT_NE(reduce, nullptr);
  const std::string other = map0.agent_id == "a" ? "b" : "a";
  EXPECT_EQ(reduce->agent_id, other);
  EXPECT_EQ(reduce->task.inputs[0].url, "http://" + other + ":7337/blocks/b0");
  EXPECT_EQ(scheduler_.progress().reruns_for_lost_blocks, 0u);
}

TEST_F(BlockSchedulingTest, HeartbeatProgressShowsForDecommissioningAgents) {
  addBlockAgent("a", 1);
  Json report = {{"state", "migrating"}, {"blocks_total", 4},   {"blocks_migrated", 1},
                 {"blocks_failed", 1},   {"bytes_total", 4096}, {"bytes_migrated", 1024}};
  EXPECT_TRUE(scheduler_.noteDecommissionProgress("a", report));
  EXPECT_FALSE(scheduler_.noteDecommissionProgress("a", report)) << "same state: no news";
  scheduler_.decommissionAgent("a");
  Progress p = scheduler_.progress();
  ASSERT_EQ(p.decommissions.size(), 1u);
  EXPECT_EQ(p.decommissions[0].agent_id, "a");
  EXPECT_EQ(p.decommissions[0].state, "migrating");
  EXPECT_EQ(p.decommissions[0].blocks_total, 4u);
  EXPECT_EQ(p.decommissions[0].blocks_migrated, 1u);
  EXPECT_EQ(p.decommissions[0].blocks_failed, 1u);
  EXPECT_EQ(p.decommissions[0].bytes_migrated, 1024u);
  report["state"] = "done";
  EXPECT_TRUE(scheduler_.noteDecommissionProgress("a", report));
}

}  // namespace
}  // namespace dockhand::driver
