// Fixtures of the Scheduler's tests (scheduler_test.cpp, scheduler_blocks_test.cpp): a
// Scheduler driven by a hand-made clock (now_), agents registered and launched in one call,
// and builders for tasks, jobs, status updates and block reports. Single-threaded, as the
// Scheduler is.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "dockhand/driver/scheduler.h"

namespace dockhand::driver::scheduler_fixture {

using protocol::TaskState;

inline protocol::RegisterExecutor agentReg(
    const std::string& id, int cores,
    const std::map<std::string, std::vector<std::string>>& res = {}) {
  protocol::RegisterExecutor r;
  r.executor_id = id;
  r.hostname = "host-" + id;
  r.cores = cores;
  for (auto& [name, addresses] : res)
    r.resources[name] = protocol::ResourceInfo{.name = name, .addresses = addresses};
  return r;
}

inline TaskSpec task(const std::string& name, int cpus = 1,
                     std::map<std::string, double> res = {}) {
  TaskSpec t;
  t.name = name;
  t.cpus = cpus;
  t.resources = std::move(res);
  t.payload = {{"command", {"/bin/true"}}};
  return t;
}

inline JobSpec job(std::vector<TaskSpec> tasks, int max_attempts = 0) {
  JobSpec j;
  j.name = "test";
  j.max_attempts = max_attempts;
  j.tasks = std::move(tasks);
  return j;
}

inline std::vector<Action> launches(const Actions& actions) {
  std::vector<Action> out;
  for (const auto& a : actions) {
    if (a.kind == Action::Kind::kLaunch) out.push_back(a);
  }
  return out;
}

inline protocol::StatusUpdate status(const Action& launch, TaskState state) {
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
  // Every test drives the state machines through legal moves only (canMove).
  void TearDown() override { EXPECT_EQ(scheduler_.illegalMoves(), 0u); }
  TimePoint now_ = TimePoint{} + std::chrono::hours(1);
  Scheduler scheduler_{SchedulerOptions{4, Millis(60000)}};

  void addAgent(const std::string& id, int cores,
                const std::map<std::string, std::vector<std::string>>& res = {}) {
    Actions out;
    ASSERT_TRUE(scheduler_.registerAgent(agentReg(id, cores, res), now_, out).ok());
    ASSERT_TRUE(scheduler_.agentLaunched(id, now_, out));
    pending_.insert(pending_.end(), out.begin(), out.end());
  }
  Actions pending_;  // actions produced by addAgent
};

class BlockSchedulingTest : public SchedulerTest {
 protected:
  void addBlockAgent(const std::string& id, int cores) {
    Actions out;
    protocol::RegisterExecutor reg = agentReg(id, cores);
    reg.block_url = "http://" + id + ":7337/";
    ASSERT_TRUE(scheduler_.registerAgent(reg, now_, out).ok());
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

}  // namespace dockhand::driver::scheduler_fixture
