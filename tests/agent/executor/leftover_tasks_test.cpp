// killLeftoverTasks: the task processes an agent's earlier process left running on the same
// work directory are found by their working directory and their process groups killed; a
// process elsewhere, and a shell (a session leader) in a task's directory, are left alone.
#include "executor/leftover_tasks.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include <gtest/gtest.h>

namespace dockhand::agent {
namespace {

namespace fs = std::filesystem;

enum class Group { kOwn, kOwnSession };

// sh -c `script` in `cwd`, in a process group (or a session) of its own.
pid_t start(const fs::path& cwd, Group group, const char* script) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    if (group == Group::kOwn) {
      ::setpgid(0, 0);
    } else {
      ::setsid();
    }
    if (::chdir(cwd.c_str()) != 0) ::_exit(127);
    // Not the test's output: a stray sleep would hold CTest's pipe open until it ends.
    const int null = ::open("/dev/null", O_RDWR);
    for (int fd : {0, 1, 2}) ::dup2(null, fd);
    ::execl("/bin/sh", "sh", "-c", script, static_cast<char*>(nullptr));
    ::_exit(127);
  }
  return pid;
}

// Reaps `pid` if it ended within `wait`; returns whether it was killed by SIGKILL.
bool killedWithin(pid_t pid, std::chrono::milliseconds wait) {
  const auto until = std::chrono::steady_clock::now() + wait;
  while (std::chrono::steady_clock::now() < until) {
    int status = 0;
    if (::waitpid(pid, &status, WNOHANG) == pid) {
      return WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

bool alive(pid_t pid) { return ::kill(pid, 0) == 0; }

TEST(LeftoverTasksTest, KillsTheGroupsOfProcessesInTaskDirectoriesOnly) {
  char tmpl[] = "/tmp/dockhand-leftover-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const fs::path work = tmpl;
  fs::create_directories(work / "tasks" / "task-1" / "output");
  fs::create_directories(work / "tasks" / "task-2");
  fs::create_directories(work / "elsewhere");

  // A task with a child of its own, one that moved into its output directory, a process
  // elsewhere, and a shell opened in a task's directory.
  const pid_t task = start(work / "tasks" / "task-1", Group::kOwn, "sleep 60 & wait");
  const pid_t deeper = start(work / "tasks" / "task-1" / "output", Group::kOwn, "sleep 60");
  const pid_t other = start(work / "elsewhere", Group::kOwn, "sleep 60");
  const pid_t shell = start(work / "tasks" / "task-2", Group::kOwnSession, "sleep 60");
  // Let each one reach its directory.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));

  const std::vector<LeftoverTask> killed = killLeftoverTasks(work);
  std::vector<pid_t> pids;
  pids.reserve(killed.size());
  for (const auto& t : killed) pids.push_back(t.pid);
  EXPECT_NE(std::find(pids.begin(), pids.end(), task), pids.end());
  EXPECT_NE(std::find(pids.begin(), pids.end(), deeper), pids.end());
  EXPECT_EQ(std::find(pids.begin(), pids.end(), other), pids.end());
  EXPECT_EQ(std::find(pids.begin(), pids.end(), shell), pids.end());
  EXPECT_TRUE(killedWithin(task, std::chrono::seconds(10)));
  EXPECT_TRUE(killedWithin(deeper, std::chrono::seconds(10)));
  EXPECT_TRUE(alive(other));
  EXPECT_TRUE(alive(shell));
  for (const auto& t : killed) {
    if (t.pid == task) {
      EXPECT_EQ(t.directory, (work / "tasks" / "task-1").string());
    }
  }

  for (pid_t pid : {other, shell}) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
  }
  fs::remove_all(work);
}

TEST(LeftoverTasksTest, AWorkDirectoryWithoutTasksKillsNothing) {
  EXPECT_TRUE(killLeftoverTasks("/nonexistent/dockhand-work").empty());
}

}  // namespace
}  // namespace dockhand::agent
