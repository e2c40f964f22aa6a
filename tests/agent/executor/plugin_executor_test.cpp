// PluginExecutor with the real `process` runner: the test thread plays the core thread.
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <fstream>
#include <mutex>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "executor/plugin_executor.h"
#include "log_capture.h"
#include "plugins/plugin_host.h"
#include "queue_sink.h"
#include "test_processes.h"

namespace dockhand::agent {
namespace {

using dockhand::testing::groupGone;
using dockhand::testing::QueueSink;
using dockhand::testing::TempDir;
using protocol::TaskState;

class PluginExecutorTest : public ::testing::Test {
 protected:
  PluginExecutorTest() {
    executor_ = std::make_unique<PluginExecutor>(
        sink_, statuses_, PluginExecutorOptions{.work_dir = tmp_.path(), .executor_id = "exec-1"});
    executor_->addRunner("process", host_.createTaskRunner("process", R"({"kill_grace_ms": 200})",
                                                           executor_->runnerReports()));
  }

  // Records every status, checking that it arrives on the core thread.
  class RecordingSink final : public TaskStatusSink {
   public:
    explicit RecordingSink(std::vector<TaskStatusEvent>& events) : events_(events) {}
    void onTaskStatus(const TaskStatusEvent& status) override {
      EXPECT_EQ(std::this_thread::get_id(), core_thread_) << "status off the core thread";
      events_.push_back(status);
    }

   private:
    std::vector<TaskStatusEvent>& events_;
    std::thread::id core_thread_ = std::this_thread::get_id();
  };

  static protocol::TaskDescription shellTask(std::uint64_t id, const std::string& script) {
    protocol::TaskDescription task;
    task.task_id = id;
    task.name = "task " + std::to_string(id);
    task.payload = Json{{"shell", script}};
    return task;
  }

  // The task's terminal event, running the core queue until it comes.
  std::optional<TaskStatusEvent> terminal(std::uint64_t id) {
    std::optional<TaskStatusEvent> found;
    sink_.runUntil([&] {
      for (const auto& e : events_) {
        if (e.task_id == id && protocol::isTerminal(e.state)) {
          found = e;
          return true;
        }
      }
      return false;
    });
    return found;
  }

  pid_t groupOf(std::uint64_t id, std::size_t processes) {
    pid_t pgid = -1;
    EXPECT_TRUE(dockhand::testing::eventually([&] {
      auto dump = executor_->threadDump(id);
      if (!dump) return false;
      pgid = dump->at("pgid").get<pid_t>();
      std::size_t ready = 0;  // the leader, and children that have exec'd their program
      for (const auto& process : dump->at("processes")) {
        if (process.at("pid") == pgid ||
            (!process.at("cmdline").empty() && process.at("cmdline").at(0) != "/bin/sh"))
          ++ready;
      }
      return ready >= processes;
    }));
    return pgid;
  }

  TempDir tmp_;
  QueueSink sink_;
  std::vector<TaskStatusEvent> events_;
  RecordingSink statuses_{events_};
  PluginHost host_{{DOCKHAND_PLUGIN_DIR}};
  std::unique_ptr<PluginExecutor> executor_;
};

TEST_F(PluginExecutorTest, RunsTaskAndReportsOnCoreThread) {
  auto launched = executor_->launch(shellTask(1, "echo hi"));
  ASSERT_TRUE(launched.ok()) << launched.error().message;
  EXPECT_EQ(executor_->runningTasks(), 1u);
  auto end = terminal(1);
  ASSERT_TRUE(end);
  EXPECT_EQ(end->state, TaskState::kFinished);
  EXPECT_EQ(end->result.at("stdout"), "hi\n");
  EXPECT_EQ(events_.front().state, TaskState::kRunning);
  EXPECT_EQ(executor_->runningTasks(), 0u);
  EXPECT_TRUE(std::filesystem::is_directory(tmp_.path() / "tasks" / "task-1"));
  // Others may pass through tasks/ to a directory they were given, but list nothing.
  namespace fs = std::filesystem;
  EXPECT_EQ(fs::status(tmp_.path() / "tasks").permissions(),
            fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec);
  EXPECT_EQ(fs::status(tmp_.path() / "tasks" / "task-1").permissions(), fs::perms::owner_all);
}

TEST_F(PluginExecutorTest, FiguresThatAreNotMetricsAreDroppedWithOneWarningPerRunner) {
  fakes::LogCapture log("executor");
  executor_->addRunner("instant", host_.createTaskRunner(DOCKHAND_FIXTURE_PLUGIN_DIR
                                                         "/dockhand-fixture-instant-runner.so",
                                                         "{}", executor_->runnerReports()));
  for (std::uint64_t id = 1; id <= 2; ++id) {
    protocol::TaskDescription task;
    task.task_id = id;
    task.runner = "instant";
    task.payload = Json{{"value", 40 + id}, {"bad_metrics", true}};
    ASSERT_TRUE(executor_->launch(task).ok());
    auto end = terminal(id);
    ASSERT_TRUE(end);
    EXPECT_EQ(end->state, TaskState::kFinished) << "a bad figure never fails its task";
    EXPECT_EQ(end->result.at("stdout"), std::to_string(40 + id));
    EXPECT_EQ(end->metrics.result_bytes, 7u) << "the good figure is kept";
    EXPECT_FALSE(end->metrics.cpu_time_ms);
    EXPECT_FALSE(end->metrics.peak_rss_bytes);
  }
  const std::string text = log.text();
  const std::string warning = "task runner 'instant' reported figures that are not metrics";
  const auto first = text.find(warning);
  ASSERT_NE(first, std::string::npos) << text;
  EXPECT_NE(text.find("(task 1: "), std::string::npos) << text;
  EXPECT_NE(text.find("cpu_time_ms"), std::string::npos) << "the warning names the figures";
  EXPECT_EQ(text.find(warning, first + 1), std::string::npos) << "one warning per runner: " << text;
}

TEST_F(PluginExecutorTest, FailureCarriesExitCodeAndStderr) {
  ASSERT_TRUE(executor_->launch(shellTask(1, "echo broken >&2; exit 3")).ok());
  auto end = terminal(1);
  ASSERT_TRUE(end);
  EXPECT_EQ(end->state, TaskState::kFailed);
  EXPECT_EQ(end->exit_code, 3);
  EXPECT_EQ(end->reason, "exited with code 3");
  EXPECT_EQ(end->stderr_tail, "broken\n");
}

// Past keep_task_dirs, an ended task's directory is cleared and renamed for a new task rather
// than removed and made anew: the same inodes, and nothing of the task before in it.
TEST_F(PluginExecutorTest, ANewTaskGetsAnEndedTasksDirectoryCleared) {
  namespace fs = std::filesystem;
  executor_->keepTaskDirs(0);
  const fs::path tasks = tmp_.path() / "tasks";
  auto spares = [&] {
    std::size_t count = 0;
    std::error_code ec;
    for (auto it = fs::directory_iterator(tasks / "spare", ec); !ec && it != fs::end(it);
         it.increment(ec)) {
      ++count;
    }
    return count;
  };
  // What an earlier agent left parked is not this agent's to hand out: it goes.
  fs::create_directories(tasks / "spare" / "0" / "output");
  std::ofstream(tasks / "spare" / "0" / "stdout") << "an earlier agent's task\n";
  // Prints the inodes of its directory and subdirectories and what the directory holds, then
  // leaves things behind and takes the agent's write right away.
  const std::string script =
      "stat -c %i . output input; ls -A; echo left > junk; echo x > output/rdd_0_0;"
      " mkdir -p scratch/deep; chmod 500 .";
  std::vector<std::string> seen;
  for (std::uint64_t id = 1; id <= 2; ++id) {
    ASSERT_TRUE(executor_->launch(shellTask(id, script)).ok());
    auto end = terminal(id);
    ASSERT_TRUE(end);
    // No block store here: the output file stays in output/ until the directory is cleared.
    ASSERT_EQ(end->state, TaskState::kFinished) << end->reason;
    seen.push_back(end->result.at("stdout").get<std::string>());
    const fs::path task_dir = tasks / ("task-" + std::to_string(id));
    EXPECT_TRUE(dockhand::testing::eventually([&] {
      return !fs::exists(task_dir) && spares() == 1;
    })) << spares();
  }
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0], seen[1]);  // three inodes, then the listing
  EXPECT_THAT(seen[1], ::testing::EndsWith("input\noutput\nstderr\nstdout\n"));
}

// A task that left its directory as it got it leaves nothing to keep: the next task gets that
// directory at once, renamed, and the first task's logs answer empty from then on (never with
// what the next task writes in the same files).
TEST_F(PluginExecutorTest, ATaskThatWroteNothingHandsItsDirectoryToTheNext) {
  namespace fs = std::filesystem;
  const fs::path tasks = tmp_.path() / "tasks";
  auto inode = [](const fs::path& path) {
    struct stat st {};
    return ::lstat(path.c_str(), &st) == 0 ? st.st_ino : 0;
  };
  ASSERT_TRUE(executor_->launch(shellTask(1, "true")).ok());
  ASSERT_TRUE(terminal(1));
  const ino_t first = inode(tasks / "task-1");
  ASSERT_NE(first, 0u) << "kept until a task takes it";
  const ino_t first_stdout = inode(tasks / "task-1" / "stdout");
  LogFile log = executor_->openTaskLog(1, "stdout");
  EXPECT_EQ(log.status, 200);
  EXPECT_EQ(log.fd, -1) << "an empty log, from memory";

  ASSERT_TRUE(executor_->launch(shellTask(2, "echo second; echo oops >&2")).ok());
  auto second = terminal(2);
  ASSERT_TRUE(second);
  EXPECT_EQ(second->result.at("stdout"), "second\n");
  EXPECT_FALSE(fs::exists(tasks / "task-1"));
  EXPECT_EQ(inode(tasks / "task-2"), first);
  EXPECT_EQ(inode(tasks / "task-2" / "stdout"), first_stdout);
  for (const char* stream : {"stdout", "stderr"}) {
    log = executor_->openTaskLog(1, stream);
    EXPECT_EQ(log.status, 200) << stream << ": " << log.reason;
    EXPECT_EQ(log.fd, -1) << stream;
    log = executor_->openTaskLog(2, stream);
    ASSERT_GE(log.fd, 0) << stream << ": " << log.reason;
    EXPECT_EQ(log.size, fs::file_size(tasks / "task-2" / stream));
    ::close(log.fd);
  }

  // A task that wrote keeps its directory (keep_task_dirs): the next one gets another.
  ASSERT_TRUE(executor_->launch(shellTask(3, "true")).ok());
  ASSERT_TRUE(terminal(3));
  EXPECT_TRUE(fs::exists(tasks / "task-2"));
  EXPECT_NE(inode(tasks / "task-3"), first);
}

// A driver that sends a task id again (the protocol says it never does) gets a run whose
// directory no other launch takes from under it, with logs of its own.
TEST_F(PluginExecutorTest, ATaskIdSentAgainKeepsItsDirectoryToItself) {
  namespace fs = std::filesystem;
  const fs::path tasks = tmp_.path() / "tasks";
  ASSERT_TRUE(executor_->launch(shellTask(1, "true")).ok());
  ASSERT_TRUE(terminal(1));
  events_.clear();
  ASSERT_TRUE(executor_->launch(shellTask(1, "sleep 0.3; echo again")).ok());
  ASSERT_TRUE(executor_->launch(shellTask(2, "true")).ok());
  ASSERT_TRUE(terminal(2));
  EXPECT_TRUE(fs::exists(tasks / "task-1")) << "task 2 took the directory of a running task";
  auto again = terminal(1);
  ASSERT_TRUE(again);
  EXPECT_EQ(again->result.at("stdout"), "again\n");
  LogFile log = executor_->openTaskLog(1, "stdout");
  ASSERT_GE(log.fd, 0) << log.status << " " << log.reason;
  EXPECT_EQ(log.size, 6u);
  ::close(log.fd);
}

// The task's directory is made on the runner's call thread, not the core thread: one that
// cannot be made fails the task with the reason, and the next task runs.
TEST_F(PluginExecutorTest, ADirectoryThatCannotBeMadeFailsItsTask) {
  namespace fs = std::filesystem;
  const fs::path tasks = tmp_.path() / "tasks";
  fs::create_directories(tasks);
  std::ofstream(tasks / "task-5") << "a file where the task's directory goes\n";
  ASSERT_TRUE(executor_->launch(shellTask(5, "echo never")).ok());
  auto end = terminal(5);
  ASSERT_TRUE(end);
  EXPECT_EQ(end->state, TaskState::kFailed);
  EXPECT_THAT(end->reason, ::testing::HasSubstr("cannot create task directory"));
  EXPECT_THAT(end->reason, ::testing::HasSubstr("task-5"));
  ASSERT_TRUE(executor_->launch(shellTask(6, "echo ran")).ok());
  auto next = terminal(6);
  ASSERT_TRUE(next);
  EXPECT_EQ(next->state, TaskState::kFinished) << next->reason;
  EXPECT_EQ(next->result.at("stdout").get<std::string>(), "ran\n");
}

TEST_F(PluginExecutorTest, TaskEnvironmentNamesTaskAndResources) {
  auto task =
      shellTask(7,
                "echo \"$DOCKHAND_TASK_ID|$DOCKHAND_TASK_ATTEMPT|$DOCKHAND_TASK_NAME|"
                "$DOCKHAND_PARTITION|$DOCKHAND_EXECUTOR_ID|$DOCKHAND_CPUS|"
                "$DOCKHAND_RESOURCE_GPU|$CUDA_VISIBLE_DEVICES|$DOCKHAND_RESOURCE_MY_FPGA\"");
  task.attempt = 2;
  task.partition = 5;
  task.cpus = 3;
  task.resources = {{"gpu", {"0", "2"}}, {"my.fpga", {"7"}}};
  ASSERT_TRUE(executor_->launch(task).ok());
  auto end = terminal(7);
  ASSERT_TRUE(end);
  EXPECT_EQ(end->result.at("stdout"), "7|2|task 7|5|exec-1|3|0,2|0,2|7\n");
}

TEST_F(PluginExecutorTest, UnknownRunnerIsRefused) {
  auto task = shellTask(1, "true");
  task.runner = "docker";
  auto refused = executor_->launch(task);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().message, "no task runner named 'docker' (loaded runners: process)");
  EXPECT_EQ(executor_->runningTasks(), 0u);
}

TEST_F(PluginExecutorTest, RunnerRefusalIsReportedFailedOnTheCoreThread) {
  // launch() runs on the runner's call thread, so a refusal comes back as a FAILED status.
  protocol::TaskDescription task;
  task.task_id = 1;
  task.payload = Json{{"command", {"dockhand-no-such-command"}}};
  EXPECT_TRUE(executor_->launch(task).ok());
  auto end = terminal(1);
  ASSERT_TRUE(end);
  EXPECT_EQ(end->state, TaskState::kFailed);
  EXPECT_EQ(end->reason,
            "process: cannot start 'dockhand-no-such-command': No such file or directory");
  EXPECT_EQ(executor_->runningTasks(), 0u);
  ASSERT_TRUE(executor_->launch(shellTask(2, "true")).ok());
  ASSERT_TRUE(terminal(2));
  std::size_t task1_events = 0;
  for (const auto& e : events_) task1_events += e.task_id == 1u;
  EXPECT_EQ(task1_events, 1u) << "exactly one status for the refused task";
}

TEST_F(PluginExecutorTest, KillRightAfterLaunchRunsAfterIt) {
  // Both go to the runner's call thread in order: the kill finds the task started.
  ASSERT_TRUE(executor_->launch(shellTask(1, "sleep 100")).ok());
  EXPECT_TRUE(executor_->kill(1, false, "changed my mind"));
  auto end = terminal(1);
  ASSERT_TRUE(end);
  EXPECT_EQ(end->state, TaskState::kKilled);
  EXPECT_EQ(end->reason, "changed my mind");
}

TEST_F(PluginExecutorTest, KillAndThreadDumpRouteToTheRunner) {
  ASSERT_TRUE(executor_->launch(shellTask(1, "sleep 100 & sleep 100; wait")).ok());
  pid_t pgid = groupOf(1, 3);
  EXPECT_TRUE(executor_->kill(1, false, "no longer needed"));
  auto end = terminal(1);
  ASSERT_TRUE(end);
  EXPECT_EQ(end->state, TaskState::kKilled);
  EXPECT_EQ(end->reason, "no longer needed");
  EXPECT_TRUE(dockhand::testing::eventually([&] { return groupGone(pgid); }));
  EXPECT_FALSE(executor_->kill(1, false, "again"));
  EXPECT_FALSE(executor_->threadDump(1));
}

TEST_F(PluginExecutorTest, StopAllEndsEveryTaskWithinGrace) {
  ASSERT_TRUE(executor_->launch(shellTask(1, "sleep 100 & sleep 100; wait")).ok());
  ASSERT_TRUE(executor_->launch(shellTask(2, "trap '' TERM; sleep 100")).ok());
  ASSERT_TRUE(executor_->launch(shellTask(3, "sleep 100")).ok());
  pid_t g1 = groupOf(1, 3);
  pid_t g2 = groupOf(2, 2);
  pid_t g3 = groupOf(3, 1);
  const auto start = std::chrono::steady_clock::now();
  executor_->stopAll(std::chrono::seconds(5));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_TRUE(groupGone(g1));
  EXPECT_TRUE(groupGone(g2));
  EXPECT_TRUE(groupGone(g3));
  for (std::uint64_t id : {1, 2, 3}) {
    auto end = terminal(id);
    ASSERT_TRUE(end) << "task " << id;
    EXPECT_EQ(end->state, TaskState::kKilled);
  }
  EXPECT_EQ(executor_->runningTasks(), 0u);
}

TEST_F(PluginExecutorTest, StopAllGivesUpWaitingAfterGrace) {
  // The runner's SIGKILL comes after 200 ms; a 50 ms grace ends sooner, then destroy kills.
  ASSERT_TRUE(executor_->launch(shellTask(1, "trap '' TERM; sleep 100")).ok());
  pid_t pgid = groupOf(1, 2);
  executor_->stopAll(std::chrono::milliseconds(50));
  EXPECT_TRUE(groupGone(pgid));
  auto end = terminal(1);
  ASSERT_TRUE(end);
  EXPECT_EQ(end->state, TaskState::kKilled);
}

}  // namespace
}  // namespace dockhand::agent
