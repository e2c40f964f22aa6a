// The built-in `process` runner, loaded by the real plugin host, running real processes.
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <set>
#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "plugins/plugin_host.h"
#include "process_task_json.h"
#include "status_recorder.h"
#include "test_processes.h"

namespace dockhand::agent {
namespace {

using dockhand::testing::eventually;
using dockhand::testing::groupGone;
using dockhand::testing::StatusRecorder;
using dockhand::testing::TempDir;
using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;

std::string readFileText(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

class ProcessPluginTest : public ::testing::Test {
 protected:
  void SetUp() override { runner_ = makeRunner(R"({"kill_grace_ms": 300})"); }
  void TearDown() override { runner_.reset(); }

  std::unique_ptr<TaskRunnerPlugin> makeRunner(const std::string& config) {
    return host_.createTaskRunner("process", config, recorder_.callback());
  }

  // A task_json for `payload`, with its own work directory.
  std::string task(std::uint64_t id, json payload, json env = json::object()) {
    return processTaskJson(tmp_.path(), id, std::move(payload), std::move(env));
  }
  static json shell(const std::string& script) { return json{{"shell", script}}; }

  // Launches and waits until the task's group has `count` processes; returns its pgid.
  pid_t launchAndWaitForProcesses(std::uint64_t id, const std::string& script, std::size_t count) {
    auto launched = runner_->launch(task(id, shell(script)));
    EXPECT_TRUE(launched.ok()) << launched.error;
    pid_t pgid = -1;
    EXPECT_TRUE(eventually([&] {
      auto dump = runner_->threadDump(id);
      if (!dump.ok()) return false;
      auto parsed = json::parse(dump.json);
      pgid = parsed.at("pgid").get<pid_t>();
      // The leader, plus children that have exec'd their own program (not a forked shell).
      std::size_t ready = 0;
      for (const auto& process : parsed.at("processes")) {
        if (process.at("pid") == pgid ||
            (!process.at("cmdline").empty() && process.at("cmdline").at(0) != "/bin/sh"))
          ++ready;
      }
      return ready >= count;
    })) << "task "
        << id << " never had " << count << " processes";
    return pgid;
  }

  TempDir tmp_;
  StatusRecorder recorder_;
  PluginHost host_{{DOCKHAND_PLUGIN_DIR}};
  std::unique_ptr<TaskRunnerPlugin> runner_;
};

TEST_F(ProcessPluginTest, StdoutComesBackAsResult) {
  auto launched = runner_->launch(task(1, json{{"command", {"/bin/echo", "hello", "world"}}}));
  ASSERT_TRUE(launched.ok()) << launched.error;
  auto end = recorder_.waitTerminal(1);
  ASSERT_TRUE(end);
  EXPECT_EQ(end->state, DH_TASK_FINISHED) << end->detail;
  const json& result = end->detail.at("result");
  EXPECT_EQ(result.at("stdout"), "hello world\n");
  EXPECT_EQ(result.at("exit_code"), 0);
  EXPECT_EQ(result.at("stdout_truncated"), false);
  EXPECT_GE(result.at("duration_ms").get<int>(), 0);
  auto reports = recorder_.reports(1);
  ASSERT_EQ(reports.size(), 2u);
  EXPECT_EQ(reports[0].state, DH_TASK_RUNNING);
}

TEST_F(ProcessPluginTest, SearchesPathForBareCommand) {
  ASSERT_TRUE(runner_->launch(task(1, json{{"command", {"echo", "found"}}})).ok());
  auto end = recorder_.waitTerminal(1);
  ASSERT_TRUE(end);
  EXPECT_EQ(end->detail.at("result").at("stdout"), "found\n");
}

TEST_F(ProcessPluginTest, ResultIsCutAtLimit) {
  runner_ = makeRunner(R"({"result_limit_bytes": 4})");
  ASSERT_TRUE(runner_->launch(task(1, shell("printf 123456789"))).ok());
  auto end = recorder_.waitTerminal(1);
  ASSERT_TRUE(end);
  EXPECT_EQ(end->detail.at("result").at("stdout"), "1234");
  EXPECT_EQ(end->detail.at("result").at("stdout_truncated"), true);
}

TEST_F(ProcessPluginTest, NonZeroExitFailsWithStderrTail) {
  runner_ = makeRunner(R"({"stderr_tail_bytes": 5})");
  ASSERT_TRUE(runner_->launch(task(1, shell("echo 'first line' >&2; echo oops >&2; exit 3"))).ok());
  auto end = recorder_.waitTerminal(1);
  ASSERT_TRUE(end);
  EXPECT_EQ(end->state, DH_TASK_FAILED);
  EXPECT_EQ(end->detail.at("exit_code"), 3);
  EXPECT_EQ(end->detail.at("reason"), "exited with code 3");
  EXPECT_EQ(end->detail.at("stderr_tail"), "oops\n");
}

TEST_F(ProcessPluginTest, DeathBySignalFails) {
  ASSERT_TRUE(runner_->launch(task(1, shell("kill -9 $$"))).ok());
  auto end = recorder_.waitTerminal(1);
  ASSERT_TRUE(end);
  EXPECT_EQ(end->state, DH_TASK_FAILED);
  EXPECT_EQ(end->detail.at("signal"), 9);
  EXPECT_EQ(end->detail.at("reason"), "killed by signal 9 (SIGKILL)");
}

TEST_F(ProcessPluginTest, MissingCommandIsLaunchError) {
  auto launched = runner_->launch(task(1, json{{"command", {"dockhand-no-such-command"}}}));
  EXPECT_EQ(launched.status, DH_ERROR);
  EXPECT_EQ(launched.error, "cannot start 'dockhand-no-such-command': No such file or directory");
  launched = runner_->launch(task(2, json{{"command", {"/nonexistent/prog"}}}));
  EXPECT_EQ(launched.error, "cannot start '/nonexistent/prog': No such file or directory");
  EXPECT_TRUE(recorder_.reports(1).empty());
  EXPECT_TRUE(recorder_.reports(2).empty());
}

// Files exec would refuse are refused by the launch itself, before a child exists.
TEST_F(ProcessPluginTest, ProgramThatIsNotExecutableIsLaunchError) {
  const auto plain = tmp_.path() / "plain";
  std::ofstream(plain) << "echo never\n";
  auto launched = runner_->launch(task(1, json{{"command", {plain.string()}}}));
  EXPECT_EQ(launched.status, DH_ERROR);
  EXPECT_EQ(launched.error, "cannot start '" + plain.string() + "': Permission denied");
  launched = runner_->launch(task(2, json{{"command", {tmp_.path().string()}}}));
  EXPECT_EQ(launched.error, "cannot start '" + tmp_.path().string() + "': Permission denied");
  // Found in PATH, as a bare command, and passed over as execvp would.
  const std::string path = ::getenv("PATH") != nullptr ? ::getenv("PATH") : "";
  ::setenv("PATH", tmp_.path().c_str(), 1);
  launched = runner_->launch(task(3, json{{"command", {"plain"}}}));
  ::setenv("PATH", path.c_str(), 1);
  EXPECT_EQ(launched.error, "cannot start 'plain': Permission denied");
  EXPECT_TRUE(recorder_.reports(1).empty());
  EXPECT_TRUE(recorder_.reports(2).empty());
  EXPECT_TRUE(recorder_.reports(3).empty());
}

// An executable the kernel will not run is found out by the child's exec, after the launch
// returned: the task is RUNNING, then FAILED with the words a launch error would have.
TEST_F(ProcessPluginTest, ExecRefusedAfterTheLaunchFailsTheTask) {
  const auto no_shebang = tmp_.path() / "no-shebang";
  std::ofstream(no_shebang) << "echo a script without #!\n";
  const auto orphan = tmp_.path() / "orphan";
  std::ofstream(orphan) << "#!/nonexistent/interpreter\n";
  for (const auto& file : {no_shebang, orphan}) {
    std::filesystem::permissions(file, std::filesystem::perms::owner_all);
  }
  ASSERT_TRUE(runner_->launch(task(1, json{{"command", {no_shebang.string()}}})).ok());
  ASSERT_TRUE(runner_->launch(task(2, json{{"command", {orphan.string()}}})).ok());
  auto first = recorder_.waitTerminal(1);
  auto second = recorder_.waitTerminal(2);
  ASSERT_TRUE(first && second);
  EXPECT_EQ(first->state, DH_TASK_FAILED);
  EXPECT_EQ(first->detail.at("reason"),
            "cannot start '" + no_shebang.string() + "': Exec format error");
  EXPECT_EQ(second->state, DH_TASK_FAILED);
  EXPECT_EQ(second->detail.at("reason"),
            "cannot start '" + orphan.string() + "': No such file or directory");
  EXPECT_EQ(recorder_.reports(1).front().state, DH_TASK_RUNNING);
}

// A program named by a relative path is the working directory's (cwd), as exec would find it.
TEST_F(ProcessPluginTest, RelativeProgramIsTheWorkingDirectorys) {
  for (std::uint64_t id : {1, 2}) {
    const auto tools = tmp_.path() / ("task-" + std::to_string(id)) / "tools";
    std::filesystem::create_directories(tools);
    std::ofstream(tools / "tool") << "#!/bin/sh\necho tool ran\n";
    std::filesystem::permissions(tools / "tool", std::filesystem::perms::owner_all);
  }
  ASSERT_TRUE(runner_->launch(task(1, json{{"command", {"./tool"}}, {"cwd", "tools"}})).ok());
  auto end = recorder_.waitTerminal(1);
  ASSERT_TRUE(end);
  EXPECT_EQ(end->detail.at("result").at("stdout"), "tool ran\n") << end->detail;
  auto launched = runner_->launch(task(2, json{{"command", {"./missing"}}, {"cwd", "tools"}}));
  EXPECT_EQ(launched.error, "cannot start './missing': No such file or directory");
}

void ignoreSignal(int) {}

// What the agent ignores or catches is the default again in the task, and nothing is blocked.
TEST_F(ProcessPluginTest, TaskStartsWithDefaultSignalDispositions) {
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  struct sigaction handle {};
  handle.sa_handler = &ignoreSignal;
  struct sigaction old_usr1 {};
  struct sigaction old_usr2 {};
  ASSERT_EQ(::sigaction(SIGUSR1, &ignore, &old_usr1), 0);
  ASSERT_EQ(::sigaction(SIGUSR2, &handle, &old_usr2), 0);
  auto launched =
      runner_->launch(task(1, json{{"command", {"sed", "-n", "/^Sig/p", "/proc/self/status"}}}));
  ::sigaction(SIGUSR1, &old_usr1, nullptr);
  ::sigaction(SIGUSR2, &old_usr2, nullptr);
  ASSERT_TRUE(launched.ok()) << launched.error;
  auto end = recorder_.waitTerminal(1);
  ASSERT_TRUE(end);
  const std::string status = end->detail.at("result").at("stdout");
  EXPECT_THAT(status, HasSubstr("SigBlk:\t0000000000000000\n"));
  EXPECT_THAT(status, HasSubstr("SigIgn:\t0000000000000000\n"));
  EXPECT_THAT(status, HasSubstr("SigCgt:\t0000000000000000\n"));
}

// A directory that holds an earlier run's stdout and stderr (left by an earlier agent): the task
// starts with both empty, and its result is what it wrote alone.
TEST_F(ProcessPluginTest, StdoutAndStderrLeftInTheDirectoryStartEmpty) {
  const std::string task_json = task(1, shell("echo new; echo err >&2; exit 3"));
  const auto dir = tmp_.path() / "task-1";
  std::ofstream(dir / "stdout") << "an earlier run's output, longer than the new one\n";
  std::ofstream(dir / "stderr") << "an earlier run's errors\n";
  auto launched = runner_->launch(task_json);
  ASSERT_TRUE(launched.ok()) << launched.error;
  auto end = recorder_.waitTerminal(1);
  ASSERT_TRUE(end);
  EXPECT_EQ(end->state, DH_TASK_FAILED) << end->detail;
  EXPECT_EQ(end->detail.at("stderr_tail"), "err\n");
  EXPECT_EQ(readFileText(dir / "stdout"), "new\n");
}

// The launch returns before the child has exec'd, or even made its process group: a kill at
// once still reaches every process of the task.
TEST_F(ProcessPluginTest, KillRightAfterTheLaunchReachesTheTask) {
  constexpr std::uint64_t kTasks = 50;
  for (std::uint64_t id = 1; id <= kTasks; ++id) {
    ASSERT_TRUE(runner_->launch(task(id, shell("sleep 30"))).ok());
    ASSERT_TRUE(runner_->kill(id, /*interrupt=*/true, "at once").ok());
  }
  for (std::uint64_t id = 1; id <= kTasks; ++id) {
    auto end = recorder_.waitTerminal(id);
    ASSERT_TRUE(end) << "task " << id << " was not killed";
    EXPECT_EQ(end->state, DH_TASK_KILLED);
    EXPECT_EQ(end->detail.at("reason"), "at once");
  }
}

TEST_F(ProcessPluginTest, BadPayloadNamesTheField) {
  auto launched = runner_->launch(task(1, json{{"command", json::array()}}));
  EXPECT_EQ(launched.status, DH_INVALID_ARGUMENT);
  EXPECT_EQ(launched.error, "payload/command: must be a non-empty array of strings");
  launched = runner_->launch(task(2, json{{"command", {"a", 1}}}));
  EXPECT_EQ(launched.error, "payload/command: must be a non-empty array of strings");
  launched = runner_->launch(task(3, json{{"shell", "true"}, {"env", {{"X", 1}}}}));
  EXPECT_EQ(launched.error, "payload/env/X: must be a string");
  launched = runner_->launch(task(4, json{{"shel", "true"}}));
  EXPECT_EQ(launched.error, "payload/shel: unknown key (known keys: command, shell, env, cwd)");
  launched = runner_->launch(task(5, json{{"shell", "true"}, {"command", {"true"}}}));
  EXPECT_EQ(launched.error, R"(payload: needs exactly one of "command" or "shell")");
  launched = runner_->launch("not json");
  EXPECT_EQ(launched.status, DH_INVALID_ARGUMENT);
  EXPECT_EQ(launched.error, "task_json: is not valid JSON");
}

TEST_F(ProcessPluginTest, EnvironmentAndWorkingDirectory) {
  ::setenv("PROCESS_TEST_INHERITED", "inherited", 1);
  // The agent's own variables never reach a task, even when it inherits the environment.
  ::setenv("DOCKHAND_TEST_SECRET", "agent-only", 1);
  std::filesystem::create_directories(tmp_.path() / "task-1" / "sub");
  auto payload =
      json{{"shell", "echo \"$PROCESS_TEST_INHERITED $A $B $(pwd)$DOCKHAND_TEST_SECRET\""},
           {"env", {{"B", "payload-b"}, {"A", "payload-a"}}},
           {"cwd", "sub"}};
  ASSERT_TRUE(runner_->launch(task(1, payload, {{"A", "task-a"}, {"C", "c"}})).ok());
  auto end = recorder_.waitTerminal(1);
  ASSERT_TRUE(end);
  EXPECT_EQ(end->detail.at("result").at("stdout"),
            "inherited payload-a payload-b " + (tmp_.path() / "task-1" / "sub").string() + "\n");
  // stdout and stderr are files in the work directory.
  EXPECT_TRUE(std::filesystem::exists(tmp_.path() / "task-1" / "stdout"));
  EXPECT_TRUE(std::filesystem::exists(tmp_.path() / "task-1" / "stderr"));
}

// Descriptors this process got from whoever started it without FD_CLOEXEC: not ours to hide.
std::set<std::string> inheritedDescriptors() {
  std::set<std::string> fds;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
    const std::string name = entry.path().filename().string();
    int flags = ::fcntl(std::stoi(name), F_GETFD);
    if (flags >= 0 && !(flags & FD_CLOEXEC)) fds.insert(name);
  }
  return fds;
}

TEST_F(ProcessPluginTest, TaskInheritsNoDescriptorOfTheAgent) {
  // Taken before the runner opens its epoll, eventfd and pidfds, so that those count.
  runner_.reset();
  const std::set<std::string> outside = inheritedDescriptors();
  runner_ = makeRunner("{}");
  launchAndWaitForProcesses(1, "sleep 100", 1);
  // ls prints the descriptors it has: 0-2 and the directory it reads.
  ASSERT_TRUE(runner_->launch(task(2, shell("ls /proc/self/fd"))).ok());
  auto end = recorder_.waitTerminal(2);
  ASSERT_TRUE(end);
  std::istringstream fds(end->detail.at("result").at("stdout").get<std::string>());
  int extra = 0;
  for (std::string fd; fds >> fd;) {
    if (std::stoi(fd) <= 2 || outside.count(fd)) continue;
    ++extra;
  }
  EXPECT_LE(extra, 1) << end->detail.dump();
  // stdin is /dev/null.
  ASSERT_TRUE(runner_->launch(task(3, shell("readlink /proc/self/fd/0"))).ok());
  EXPECT_EQ(recorder_.waitTerminal(3)->detail.at("result").at("stdout"), "/dev/null\n");
  runner_->kill(1, true, "done");
}

TEST_F(ProcessPluginTest, KillStopsTheWholeProcessGroup) {
  pid_t pgid = launchAndWaitForProcesses(1, "sleep 100 & sleep 100; wait", 3);
  ASSERT_GT(pgid, 0);
  auto killed = runner_->kill(1, false, "stage cancelled");
  ASSERT_TRUE(killed.ok()) << killed.error;
  auto end = recorder_.waitTerminal(1);
  ASSERT_TRUE(end);
  EXPECT_EQ(end->state, DH_TASK_KILLED);
  EXPECT_EQ(end->detail.at("reason"), "stage cancelled");
  EXPECT_TRUE(eventually([&] { return groupGone(pgid); }));
  EXPECT_EQ(runner_->kill(1, false, "again").status, DH_NOT_FOUND);
}

TEST_F(ProcessPluginTest, InterruptKillsAtOnce) {
  runner_ = makeRunner(R"({"kill_grace_ms": 600000})");
  pid_t pgid = launchAndWaitForProcesses(1, "trap '' TERM; sleep 100", 2);
  ASSERT_TRUE(runner_->kill(1, true, "interrupted").ok());
  auto end = recorder_.waitTerminal(1, std::chrono::seconds(10));
  ASSERT_TRUE(end);
  EXPECT_EQ(end->state, DH_TASK_KILLED);
  EXPECT_EQ(end->detail.at("reason"), "interrupted");
  EXPECT_TRUE(eventually([&] { return groupGone(pgid); }));
}

TEST_F(ProcessPluginTest, TermIgnoringTaskIsKilledAfterGrace) {
  pid_t pgid = launchAndWaitForProcesses(1, "trap '' TERM; sleep 100", 2);
  const auto asked = std::chrono::steady_clock::now();
  ASSERT_TRUE(runner_->kill(1, false, "stop").ok());
  auto end = recorder_.waitTerminal(1, std::chrono::seconds(10));
  ASSERT_TRUE(end);
  EXPECT_EQ(end->state, DH_TASK_KILLED);
  EXPECT_GE(std::chrono::steady_clock::now() - asked, std::chrono::milliseconds(300));
  EXPECT_TRUE(eventually([&] { return groupGone(pgid); }));
}

TEST_F(ProcessPluginTest, LeaderExitKillsWhatItLeftBehind) {
  ASSERT_TRUE(runner_->launch(task(1, shell("sleep 100 & echo $$"))).ok());
  auto end = recorder_.waitTerminal(1);
  ASSERT_TRUE(end);
  EXPECT_EQ(end->state, DH_TASK_FINISHED);
  pid_t pgid = std::stoi(end->detail.at("result").at("stdout").get<std::string>());
  EXPECT_TRUE(eventually([&] { return groupGone(pgid); }));
}

TEST_F(ProcessPluginTest, ThreadDumpListsTheProcessTree) {
  pid_t pgid = launchAndWaitForProcesses(1, "sleep 100 & sleep 101; wait", 3);
  auto dumped = runner_->threadDump(1);
  ASSERT_TRUE(dumped.ok()) << dumped.error;
  json dump = json::parse(dumped.json);
  EXPECT_EQ(dump.at("task_id"), 1);
  EXPECT_EQ(dump.at("pgid"), pgid);
  std::set<std::string> commands;
  for (const auto& process : dump.at("processes")) {
    EXPECT_TRUE(process.contains("pid"));
    EXPECT_TRUE(process.contains("ppid"));
    EXPECT_TRUE(process.contains("state"));
    ASSERT_FALSE(process.at("threads").empty());
    const auto& thread = process.at("threads").at(0);
    EXPECT_EQ(thread.at("tid"), process.at("pid"));
    EXPECT_TRUE(thread.contains("name"));
    EXPECT_TRUE(thread.contains("state"));
    std::string cmdline;
    for (const auto& arg : process.at("cmdline")) cmdline += arg.get<std::string>() + " ";
    commands.insert(cmdline);
  }
  EXPECT_TRUE(commands.count("sleep 100 ")) << dump.dump();
  EXPECT_TRUE(commands.count("sleep 101 ")) << dump.dump();
  EXPECT_EQ(runner_->threadDump(99).status, DH_NOT_FOUND);
  runner_->kill(1, true, "done");
}

TEST_F(ProcessPluginTest, DestroyLeavesNoProcessBehind) {
  pid_t first = launchAndWaitForProcesses(1, "sleep 100 & sleep 100; wait", 3);
  pid_t second = launchAndWaitForProcesses(2, "trap '' TERM; sleep 100", 2);
  runner_.reset();
  EXPECT_TRUE(groupGone(first));
  EXPECT_TRUE(groupGone(second));
  auto end = recorder_.waitTerminal(1, std::chrono::milliseconds(0));
  ASSERT_TRUE(end);
  EXPECT_EQ(end->state, DH_TASK_KILLED);
  EXPECT_EQ(end->detail.at("reason"), "task runner shut down");
}

TEST_F(ProcessPluginTest, UnknownTaskIsNotFound) {
  auto killed = runner_->kill(42, false, "x");
  EXPECT_EQ(killed.status, DH_NOT_FOUND);
  EXPECT_EQ(killed.error, "no running task 42");
}

TEST_F(ProcessPluginTest, DuplicateTaskIdIsRefused) {
  launchAndWaitForProcesses(1, "sleep 100", 1);
  auto again = runner_->launch(task(1, shell("true")));
  EXPECT_EQ(again.status, DH_INVALID_ARGUMENT);
  EXPECT_EQ(again.error, "task 1 is already running");
  runner_->kill(1, true, "done");
}

TEST_F(ProcessPluginTest, BadConfigIsRefusedAtCreate) {
  // The host refuses what the runner's schema does not allow, before create().
  try {
    makeRunner(R"({"kill_grace": 10})");
    FAIL() << "created with an unknown key";
  } catch (const PluginLoadError& e) {
    EXPECT_THAT(e.what(), HasSubstr("config /kill_grace: unknown key (not allowed by the schema)"));
  }
  EXPECT_THROW(makeRunner(R"({"kill_grace_ms": -1})"), PluginLoadError);
  // What only the runner checks, create() refuses.
  try {
    makeRunner(R"({"env_allow": ["HOME"]})");
    FAIL() << "created with env_allow while inheriting the environment";
  } catch (const PluginLoadError& e) {
    EXPECT_THAT(e.what(), HasSubstr("create failed: config/env_allow: only applies when the "
                                    "environment is not inherited"));
  }
}

TEST_F(ProcessPluginTest, ManyShortTasksAllReportOnce) {
  constexpr int kTasks = 200;
  for (int i = 1; i <= kTasks; ++i) {
    auto launched = runner_->launch(task(i, json{{"command", {"/bin/true"}}}));
    ASSERT_TRUE(launched.ok()) << launched.error;
  }
  for (int i = 1; i <= kTasks; ++i) {
    auto end = recorder_.waitTerminal(i);
    ASSERT_TRUE(end) << "task " << i;
    EXPECT_EQ(end->state, DH_TASK_FINISHED);
    EXPECT_EQ(recorder_.reports(i).size(), 2u);
  }
}

// Tasks run as another user (`nobody`), with a scrubbed environment and resource limits. The
// agent must be root for this; the tests are skipped otherwise.
class ProcessPrivilegeTest : public ProcessPluginTest {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root: tasks run as another user";
    ProcessPluginTest::SetUp();
    // As the agent's work directory: others pass through to their task's directory.
    std::filesystem::permissions(tmp_.path(), std::filesystem::perms::owner_all |
                                                  std::filesystem::perms::group_exec |
                                                  std::filesystem::perms::others_exec);
  }
  // A task_json whose work directory is 0700, as the executor makes them.
  std::string privateTask(std::uint64_t id, json payload, json env = json::object()) {
    std::string made = task(id, std::move(payload), std::move(env));
    std::filesystem::permissions(taskDir(id), std::filesystem::perms::owner_all);
    return made;
  }
  std::filesystem::path taskDir(std::uint64_t id) const {
    return tmp_.path() / ("task-" + std::to_string(id));
  }
  // The stdout of a task that must finish.
  std::string runToEnd(std::uint64_t id, const std::string& script, json env = json::object()) {
    auto launched = runner_->launch(privateTask(id, shell(script), std::move(env)));
    EXPECT_TRUE(launched.ok()) << launched.error;
    auto end = recorder_.waitTerminal(id);
    if (!end) return "<no end>";
    EXPECT_EQ(end->state, DH_TASK_FINISHED) << end->detail.dump();
    if (end->state != DH_TASK_FINISHED) return "<" + end->detail.dump() + ">";
    return end->detail.at("result").at("stdout").get<std::string>();
  }
  static uid_t ownerOf(const std::filesystem::path& path) {
    struct stat st {};
    return ::lstat(path.c_str(), &st) == 0 ? st.st_uid : static_cast<uid_t>(-1);
  }
};

TEST_F(ProcessPrivilegeTest, TaskRunsAsTheConfiguredUserAndGroupOnly) {
  runner_ = makeRunner(R"({"user": "nobody", "group": "nogroup"})");
  // Its own work directory is its own while it runs; the outputs it writes are kept.
  EXPECT_EQ(runToEnd(1,
                     "id -u; id -g; id -G; stat -c %u . ; echo out > made; mkdir d; "
                     "echo deep > d/f"),
            "65534\n65534\n65534\n65534\n");
  // Once it ended, everything in its directory is the agent's again.
  for (const char* name : {"", "stdout", "stderr", "made", "d", "d/f"}) {
    EXPECT_EQ(ownerOf(taskDir(1) / name), 0u) << name;
  }
  EXPECT_EQ(readFileText(taskDir(1) / "d" / "f"), "deep\n");
}

TEST_F(ProcessPrivilegeTest, NoDescriptorOfTheAgentCrossesToTheTask) {
  // Even one the agent leaves open across exec (no FD_CLOEXEC).
  int leaked = ::open("/dev/null", O_RDONLY);
  ASSERT_GE(leaked, 3);
  runner_ = makeRunner(R"({"user": "nobody"})");
  // ls prints the descriptors it has: 0-2 and the directory it reads.
  std::string fds = runToEnd(1, "ls /proc/self/fd");
  ::close(leaked);
  EXPECT_EQ(fds, "0\n1\n2\n3\n");
}

TEST_F(ProcessPrivilegeTest, TaskSeesOnlyTheScrubbedEnvironment) {
  ::setenv("DOCKHAND_TEST_SECRET", "agent-only", 1);
  ::setenv("PROCESS_TEST_ALLOWED", "allowed", 1);
  ::setenv("PROCESS_TEST_OTHER", "not passed", 1);
  runner_ = makeRunner(R"({"user": "nobody", "env_allow": ["PROCESS_TEST_ALLOWED"]})");
  std::string out = runToEnd(1, "env | sort", {{"TASK_VAR", "task"}});
  std::set<std::string> lines;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) lines.insert(line);
  EXPECT_TRUE(lines.count("PROCESS_TEST_ALLOWED=allowed")) << out;
  EXPECT_TRUE(lines.count("TASK_VAR=task")) << out;
  EXPECT_TRUE(lines.count("USER=nobody")) << out;
  EXPECT_TRUE(lines.count("HOME=/nonexistent")) << out;
  EXPECT_TRUE(lines.count("PATH=/usr/local/bin:/usr/bin:/bin")) << out;
  EXPECT_THAT(out, Not(HasSubstr("DOCKHAND_TEST_SECRET"))) << out;
  EXPECT_THAT(out, Not(HasSubstr("PROCESS_TEST_OTHER"))) << out;
}

TEST_F(ProcessPrivilegeTest, LimitsAreSetSoftAndHard) {
  runner_ = makeRunner(
      R"({"user": "nobody", "limits": {"open_files": 123, "processes": 456,
          "address_space_bytes": 1073741824, "core_bytes": 0}})");
  EXPECT_EQ(runToEnd(1,
                     "exec /bin/bash -c 'ulimit -n; ulimit -u; ulimit -v; ulimit -c; "
                     "ulimit -Hn; ulimit -Hv'"),
            "123\n456\n1048576\n0\n123\n1048576\n");
  // Limits alone (the agent's own user) take the same path.
  runner_ = makeRunner(R"({"limits": {"open_files": 77}})");
  EXPECT_EQ(runToEnd(2, "id -u; exec /bin/bash -c 'ulimit -n'"), "0\n77\n");
}

TEST_F(ProcessPrivilegeTest, FailuresBeforeExecAreClearLaunchErrors) {
  runner_ = makeRunner(R"({"user": "nobody"})");
  auto launched = runner_->launch(privateTask(1, json{{"command", {"/nonexistent/prog"}}}));
  EXPECT_EQ(launched.status, DH_ERROR);
  EXPECT_EQ(launched.error, "cannot start '/nonexistent/prog': No such file or directory");
  launched = runner_->launch(privateTask(2, json{{"command", {"dockhand-no-such-command"}}}));
  EXPECT_EQ(launched.error, "cannot start 'dockhand-no-such-command': No such file or directory");
  // A working directory the task user cannot enter: the failing step is named.
  std::filesystem::create_directories(tmp_.path() / "locked");
  std::filesystem::permissions(tmp_.path() / "locked", std::filesystem::perms::owner_all);
  launched = runner_->launch(privateTask(3, json{{"shell", "true"}, {"cwd", "../locked"}}));
  EXPECT_EQ(launched.status, DH_ERROR);
  EXPECT_EQ(launched.error, "cannot start '/bin/sh': chdir(" + (taskDir(3) / "../locked").string() +
                                "): Permission denied");
  // A limit above what the kernel allows.
  runner_ = makeRunner(R"({"user": "nobody", "limits": {"open_files": 1073741824}})");
  launched = runner_->launch(privateTask(4, shell("true")));
  EXPECT_EQ(launched.status, DH_ERROR);
  EXPECT_EQ(launched.error,
            "cannot start '/bin/sh': setrlimit(RLIMIT_NOFILE, 1073741824): Operation not "
            "permitted");
  EXPECT_TRUE(recorder_.reports(1).empty());
  EXPECT_TRUE(recorder_.reports(4).empty());
  // A task that could not start leaves its directory with the agent.
  EXPECT_EQ(ownerOf(taskDir(1)), 0u);
  EXPECT_EQ(ownerOf(taskDir(4) / "stdout"), 0u);
}

}  // namespace
}  // namespace dockhand::agent
