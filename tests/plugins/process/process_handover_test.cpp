// The process runner's side of a restart in place (plugin.h, detach/adopt): a task handed over
// by one instance and taken back by another in the same process (as the agent's next program
// is: its children stay its children), loaded by the real plugin host.
#include <unistd.h>

#include <chrono>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "plugins/plugin_host.h"
#include "process_task_json.h"
#include "status_recorder.h"
#include "test_processes.h"

namespace dockhand::agent {
namespace {

using dockhand::testing::StatusRecorder;
using dockhand::testing::TempDir;
using nlohmann::json;
using ::testing::HasSubstr;

class ProcessHandoverTest : public ::testing::Test {
 protected:
  std::unique_ptr<TaskRunnerPlugin> makeRunner(StatusRecorder& recorder) {
    return host_.createTaskRunner("process", "{}", recorder.callback());
  }

  std::string task(std::uint64_t id, const std::string& script) {
    return processTaskJson(tmp_.path(), id, {{"shell", script}});
  }

  // Launches `script` as task `id` on `runner` and hands it over; returns the handle.
  json launchAndDetach(TaskRunnerPlugin& runner, std::uint64_t id, const std::string& script) {
    auto launched = runner.launch(task(id, script));
    EXPECT_TRUE(launched.ok()) << launched.error;
    auto detached = runner.detach(id);
    EXPECT_TRUE(detached.ok()) << detached.error;
    return json::parse(detached.json, nullptr, false);
  }

  TempDir tmp_;
  PluginHost host_{{DOCKHAND_PLUGIN_DIR}};
};

TEST_F(ProcessHandoverTest, ATaskThatEndsWhileHandedOverIsReportedWithItsRealExitStatus) {
  StatusRecorder before;
  StatusRecorder after;
  auto old_runner = makeRunner(before);
  const json handle = launchAndDetach(*old_runner, 1, "sleep 0.3; echo gone >&2; exit 7");
  ASSERT_TRUE(handle.is_object());
  EXPECT_GT(handle.at("pid").get<int>(), 0);
  EXPECT_GT(handle.at("start_ticks").get<unsigned long long>(), 0u);
  // The old instance goes (as the old program does) and the task outlives it.
  old_runner.reset();
  EXPECT_FALSE(before.waitTerminal(1, std::chrono::milliseconds(500)))
      << "a task handed over is reported by nobody but its adopter";
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // it has ended by now

  auto new_runner = makeRunner(after);
  auto adopted = new_runner->adopt(1, handle.dump());
  ASSERT_TRUE(adopted.ok()) << adopted.error;
  auto end = after.waitTerminal(1);
  ASSERT_TRUE(end);
  EXPECT_EQ(end->state, DH_TASK_FAILED) << end->detail;
  EXPECT_EQ(end->detail.at("exit_code"), 7) << end->detail;
  EXPECT_THAT(end->detail.at("stderr_tail").get<std::string>(), HasSubstr("gone"));
  EXPECT_EQ(after.reports(1).size(), 1u) << "no second RUNNING: the driver knows it runs";
}

TEST_F(ProcessHandoverTest, ARunningTaskTakenBackFinishesWithItsOutputAndCanBeKilled) {
  StatusRecorder before;
  StatusRecorder after;
  auto old_runner = makeRunner(before);
  const json finishing = launchAndDetach(*old_runner, 1, "sleep 0.5; echo done");
  const json sleeping = launchAndDetach(*old_runner, 2, "sleep 60");
  old_runner.reset();
  auto new_runner = makeRunner(after);
  ASSERT_TRUE(new_runner->adopt(1, finishing.dump()).ok());
  ASSERT_TRUE(new_runner->adopt(2, sleeping.dump()).ok());

  auto end = after.waitTerminal(1);
  ASSERT_TRUE(end);
  EXPECT_EQ(end->state, DH_TASK_FINISHED) << end->detail;
  EXPECT_EQ(end->detail.at("result").at("stdout"), "done\n");
  EXPECT_GE(end->detail.at("result").at("duration_ms").get<int>(), 400)
      << "its duration counts from its launch in the old program";

  ASSERT_TRUE(new_runner->kill(2, true, "stop").ok());
  auto killed = after.waitTerminal(2);
  ASSERT_TRUE(killed);
  EXPECT_EQ(killed->state, DH_TASK_KILLED);
}

TEST_F(ProcessHandoverTest, AHandleThatNamesAnotherProcessIsRefused) {
  StatusRecorder before;
  StatusRecorder after;
  auto old_runner = makeRunner(before);
  json handle = launchAndDetach(*old_runner, 1, "sleep 60");
  auto new_runner = makeRunner(after);

  // The pid now names a process that started at another time (pid reuse).
  json reused = handle;
  reused["start_ticks"] = handle["start_ticks"].get<unsigned long long>() + 1;
  auto refused = new_runner->adopt(1, reused.dump());
  EXPECT_FALSE(refused.ok());
  EXPECT_THAT(refused.error, HasSubstr("is another process now"));

  // A process that is not this agent's child: its exit status could not be known.
  json stranger = {{"pid", 1}, {"start_ticks", 0}, {"started_ns", 0}, {"work_dir", "/"}};
  auto not_child = new_runner->adopt(1, stranger.dump());
  EXPECT_FALSE(not_child.ok());

  for (const char* bad : {"", "[]", R"({"pid": "x"})", R"({"pid": 5})"}) {
    auto malformed = new_runner->adopt(1, bad);
    EXPECT_EQ(malformed.status, DH_INVALID_ARGUMENT) << bad;
    EXPECT_THAT(malformed.error, HasSubstr("not a process runner's handle")) << bad;
  }

  // Refused handles left the process alone: the right one is still taken back.
  ASSERT_TRUE(new_runner->adopt(1, handle.dump()).ok());
  ASSERT_TRUE(new_runner->kill(1, true, "stop").ok());
  auto end = after.waitTerminal(1);
  ASSERT_TRUE(end);
  EXPECT_EQ(end->state, DH_TASK_KILLED);
}

TEST_F(ProcessHandoverTest, ATaskBeingKilledIsNotHandedOver) {
  StatusRecorder recorder;
  auto runner = makeRunner(recorder);
  // The kill must come after the trap is set: a TERM before it would end the task at once,
  // and a task that has ended is not found rather than refused.
  const std::string armed = (tmp_.path() / "armed").string();
  ASSERT_TRUE(runner->launch(task(1, "trap '' TERM; touch " + armed + "; sleep 60")).ok());
  ASSERT_TRUE(dockhand::testing::eventually([&] { return ::access(armed.c_str(), F_OK) == 0; }))
      << "the task did not start within 10 s";
  ASSERT_TRUE(runner->kill(1, false, "stop").ok());
  auto detached = runner->detach(1);
  EXPECT_EQ(detached.status, DH_UNSUPPORTED) << detached.error;
  EXPECT_EQ(runner->detach(99).status, DH_NOT_FOUND);
}

}  // namespace
}  // namespace dockhand::agent
