// PluginExecutor with a runner written here that has try_launch (ABI 1.5): which tasks start
// on the core thread (the test thread), which go to launch() on the call thread, and how a
// refusal from either comes back. The runner reports a task FINISHED from the hook that
// started it, and reads no "env" (DH_RUNNER_NO_TASK_ENV).
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "executor/plugin_executor.h"
#include "fixture_common.h"
#include "plugins/plugin_host.h"
#include "queue_sink.h"
#include "test_processes.h"

namespace dockhand::agent {
namespace {

using namespace std::chrono_literals;
using dockhand::testing::QueueSink;
using protocol::TaskState;

// What the runner does, and what it saw.
struct Script {
  std::mutex mutex;
  std::condition_variable changed;
  const dh_host* host = nullptr;
  std::set<std::uint64_t> not_now;  // try_launch says DH_UNSUPPORTED
  std::set<std::uint64_t> refuse;   // try_launch or launch refuses
  std::uint64_t hold = 0;           // launch() of this task waits for `open`
  bool open = false;
  std::vector<std::string> calls;  // "try_launch 3", "launch 3", in order
  std::vector<std::thread::id> threads;
  std::string last_task_json;
  std::string error;
};
Script* gScript = nullptr;
int gInstance = 0;

std::uint64_t taskIdOf(const char* task_json) {
  return nlohmann::json::parse(task_json).at("task_id").get<std::uint64_t>();
}

dh_status create(const dh_host* host, const char*, dh_plugin** out) {
  gScript->host = host;
  *out = reinterpret_cast<dh_plugin*>(&gInstance);
  return DH_OK;
}
const char* lastError(dh_plugin*) { return gScript->error.c_str(); }

// Notes the call; DH_OK once the task is started (and reported FINISHED).
dh_status start(const char* hook, const char* task_json, bool may_decline) {
  const std::uint64_t id = taskIdOf(task_json);
  {
    std::unique_lock lock(gScript->mutex);
    gScript->calls.push_back(std::string(hook) + " " + std::to_string(id));
    gScript->threads.push_back(std::this_thread::get_id());
    gScript->last_task_json = task_json;
    gScript->changed.notify_all();
    if (may_decline && gScript->not_now.count(id) != 0) return DH_UNSUPPORTED;
    if (gScript->refuse.count(id) != 0) {
      gScript->error = "task " + std::to_string(id) + " is not welcome";
      return DH_INVALID_ARGUMENT;
    }
    if (!may_decline && gScript->hold == id) {
      gScript->changed.wait(lock, [] { return gScript->open; });
    }
  }
  gScript->host->task_status(gScript->host->ctx, id, DH_TASK_FINISHED, "{}");
  return DH_OK;
}
dh_status tryLaunch(dh_plugin*, const char* task_json) {
  return start("try_launch", task_json, true);
}
dh_status launch(dh_plugin*, const char* task_json) { return start("launch", task_json, false); }

const dh_task_runner_vtable kRunner = {sizeof(dh_task_runner_vtable),
                                       &launch,
                                       &fixture::killNothing,
                                       nullptr,
                                       nullptr,
                                       DH_RUNNER_MAKES_WORK_DIR | DH_RUNNER_NO_TASK_ENV,
                                       &tryLaunch,
                                       nullptr,
                                       nullptr};

class TryLaunchTest : public ::testing::Test {
 protected:
  TryLaunchTest() {
    gScript = &script_;
    descriptor_ = fixture::runnerDescriptor("quick");
    descriptor_.create = &create;
    descriptor_.last_error = &lastError;
    descriptor_.task_runner = &kRunner;
    host_.add(PluginLibrary::fromDescriptor(&descriptor_));
    executor_ = std::make_unique<PluginExecutor>(
        sink_, statuses_, PluginExecutorOptions{.work_dir = tmp_.path(), .executor_id = "exec-1"});
    executor_->addRunner("quick",
                         host_.createTaskRunner("quick", "{}", executor_->runnerReports()));
    // create() ran on the call thread, which may not have finished with it yet: until it has,
    // launches go there. Warm up until one starts here, then begin with a clean record.
    EXPECT_TRUE(launchUntilOneStartsHere(1000, 1200)) << "no task was started on the core thread";
    std::lock_guard lock(script_.mutex);
    script_.calls.clear();
    script_.threads.clear();
  }
  ~TryLaunchTest() override {
    {
      std::lock_guard lock(script_.mutex);
      script_.open = true;
    }
    script_.changed.notify_all();
    executor_->stopAll(1s);
  }

  class Recording final : public TaskStatusSink {
   public:
    explicit Recording(std::vector<TaskStatusEvent>& events) : events_(events) {}
    void onTaskStatus(const TaskStatusEvent& status) override { events_.push_back(status); }

   private:
    std::vector<TaskStatusEvent>& events_;
  };

  static protocol::TaskDescription task(std::uint64_t id) {
    protocol::TaskDescription t;
    t.task_id = id;
    t.runner = "quick";
    t.payload = nlohmann::json::object();
    return t;
  }

  std::optional<TaskStatusEvent> terminal(std::uint64_t id) {
    std::optional<TaskStatusEvent> found;
    sink_.runUntil([&] {
      for (const auto& e : events_) {
        if (e.task_id == id && protocol::isTerminal(e.state)) found = e;
      }
      return found.has_value();
    });
    return found;
  }

  // Launches tasks first, first + 1, ... (each to its end) until one was started by try_launch,
  // at most up to `last`; false when none was, or a launch failed.
  bool launchUntilOneStartsHere(std::uint64_t first, std::uint64_t last) {
    for (std::uint64_t id = first; id < last; ++id) {
      EXPECT_TRUE(executor_->launch(task(id)).ok());
      if (!terminal(id)) {
        ADD_FAILURE() << "task " << id << " never ended";
        return false;
      }
      if (calls().back() == "try_launch " + std::to_string(id)) return true;
    }
    return false;
  }

  std::vector<std::string> calls() {
    std::lock_guard lock(script_.mutex);
    return script_.calls;
  }

  Script script_;
  dh_plugin_descriptor descriptor_{};
  dockhand::testing::TempDir tmp_;
  QueueSink sink_;
  std::vector<TaskStatusEvent> events_;
  Recording statuses_{events_};
  PluginHost host_{{}, /*allow_insecure=*/false, PluginCallSettings{10s}};
  std::unique_ptr<PluginExecutor> executor_;
};

TEST_F(TryLaunchTest, ATaskTheRunnerCanStartAtOnceStartsOnTheCoreThread) {
  ASSERT_TRUE(executor_->launch(task(1)).ok());
  {
    std::lock_guard lock(script_.mutex);
    ASSERT_EQ(script_.calls, std::vector<std::string>{"try_launch 1"});
    EXPECT_EQ(script_.threads.front(), std::this_thread::get_id());
  }
  auto end = terminal(1);
  ASSERT_TRUE(end);
  EXPECT_EQ(end->state, TaskState::kFinished);
  EXPECT_EQ(executor_->runningTasks(), 0u);
}

TEST_F(TryLaunchTest, ARunnerThatReadsNoEnvGetsTaskJsonWithoutIt) {
  ASSERT_TRUE(executor_->launch(task(6)).ok());
  ASSERT_TRUE(terminal(6));
  std::lock_guard lock(script_.mutex);
  const auto launched = nlohmann::json::parse(script_.last_task_json);
  EXPECT_EQ(launched.at("task_id"), 6);
  EXPECT_TRUE(launched.contains("work_dir"));
  EXPECT_FALSE(launched.contains("env")) << launched.dump();
}

TEST_F(TryLaunchTest, NotNowGoesToLaunchOnTheCallThread) {
  script_.not_now = {2};
  ASSERT_TRUE(executor_->launch(task(2)).ok());
  auto end = terminal(2);
  ASSERT_TRUE(end);
  EXPECT_EQ(end->state, TaskState::kFinished);
  std::lock_guard lock(script_.mutex);
  ASSERT_EQ(script_.calls, (std::vector<std::string>{"try_launch 2", "launch 2"}));
  EXPECT_EQ(script_.threads[0], std::this_thread::get_id());
  EXPECT_NE(script_.threads[1], std::this_thread::get_id());
}

TEST_F(TryLaunchTest, ARefusalAtOnceIsReportedFailedOnceAndNotTriedAgain) {
  script_.refuse = {3};
  ASSERT_TRUE(executor_->launch(task(3)).ok()) << "refused later, as a status";
  auto end = terminal(3);
  ASSERT_TRUE(end);
  EXPECT_EQ(end->state, TaskState::kFailed);
  EXPECT_EQ(end->reason, "quick: task 3 is not welcome");
  EXPECT_EQ(calls(), std::vector<std::string>{"try_launch 3"});
  ASSERT_TRUE(executor_->launch(task(4)).ok());
  ASSERT_TRUE(terminal(4));
  std::size_t task3_events = 0;
  for (const auto& e : events_) task3_events += e.task_id == 3u;
  EXPECT_EQ(task3_events, 1u);
}

TEST_F(TryLaunchTest, WhileALaunchIsOnTheCallThreadLaterTasksQueueBehindIt) {
  script_.not_now = {5};
  script_.hold = 5;
  ASSERT_TRUE(executor_->launch(task(5)).ok());
  {
    std::unique_lock lock(script_.mutex);
    ASSERT_TRUE(script_.changed.wait_for(lock, 10s, [&] { return script_.calls.size() == 2; }));
  }
  // launch 5 is held on the call thread: 6 must not overtake it on the core thread.
  ASSERT_TRUE(executor_->launch(task(6)).ok());
  EXPECT_EQ(calls(), (std::vector<std::string>{"try_launch 5", "launch 5"}));
  {
    std::lock_guard lock(script_.mutex);
    script_.open = true;
  }
  script_.changed.notify_all();
  ASSERT_TRUE(terminal(5));
  ASSERT_TRUE(terminal(6));
  EXPECT_EQ(calls(), (std::vector<std::string>{"try_launch 5", "launch 5", "launch 6"}));
  // Once the call thread has nothing to do, the next task starts here again.
  EXPECT_TRUE(launchUntilOneStartsHere(7, 200)) << "no later task was started on the core thread";
}

}  // namespace
}  // namespace dockhand::agent
