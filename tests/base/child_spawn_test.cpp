// ChildSpawn with real children: what they get (descriptors, signals, process group, working
// directory) read back from the child itself, and a start that fails saying why.
#include "dockhand/base/child_spawn.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace dockhand {
namespace {

namespace fs = std::filesystem;

class ChildSpawnTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "dockhand-spawn-test-XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  static int waitExit(pid_t pid) {
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0) {
      if (errno != EINTR) return -1;
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

  static std::string read(const fs::path& path) {
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }

  fs::path dir_;
};

TEST_F(ChildSpawnTest, TheChildGetsItsOutputFilesDirectoryAndGroup) {
  const fs::path out = dir_ / "out";
  ChildSpawn child;
  child.ownProcessGroup().stdinFromNull().open(1, out.string(), ChildSpawn::kTruncate).dup(1, 2);
  child.chdir(dir_.string());
  // The shell prints its working directory, whether its pid leads its group, and stdin's
  // first read (empty: /dev/null); the error line goes to stdout's file through the dup.
  const Result<pid_t> pid = child.start(std::vector<std::string>{
      "/bin/sh", "-c",
      "pwd; read -r _ _ _ _ group _ </proc/$$/stat; [ $group -eq $$ ] && echo leader; "
      "cat; echo to-stderr >&2"});
  ASSERT_TRUE(pid.ok()) << pid.error().message;
  EXPECT_EQ(waitExit(*pid), 0);
  EXPECT_EQ(read(out), fs::canonical(dir_).string() + "\nleader\nto-stderr\n");
}

TEST_F(ChildSpawnTest, CleanSignalsUndoesWhatThisThreadBlocksAndThisProcessIgnores) {
  sigset_t blocked;
  sigemptyset(&blocked);
  sigaddset(&blocked, SIGUSR1);
  sigset_t before;
  ASSERT_EQ(::pthread_sigmask(SIG_BLOCK, &blocked, &before), 0);
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  struct sigaction old {};
  ASSERT_EQ(::sigaction(SIGPIPE, &ignore, &old), 0);

  auto masks = [&](bool clean) {
    const fs::path out = dir_ / (clean ? "clean" : "inherited");
    ChildSpawn child;
    if (clean) child.cleanSignals();
    child.open(1, out.string(), ChildSpawn::kTruncate);
    const Result<pid_t> pid = child.start(
        std::vector<std::string>{"/bin/grep", "-E", "^Sig(Blk|Ign)", "/proc/self/status"});
    EXPECT_TRUE(pid.ok());
    if (pid.ok()) waitExit(*pid);
    return read(out);
  };
  const std::string inherited = masks(false);
  const std::string clean = masks(true);
  ::sigaction(SIGPIPE, &old, nullptr);
  ::pthread_sigmask(SIG_SETMASK, &before, nullptr);

  // grep, started directly, prints the masks it was started with; of them only SIGUSR1's
  // bit (blocked) and SIGPIPE's (ignored) are this test's doing.
  auto bit = [](const std::string& status, const std::string& field, int signal) {
    const auto at = status.find(field + ":\t");
    if (at == std::string::npos) return false;
    const unsigned long long mask =
        std::stoull(status.substr(at + field.size() + 2, 16), nullptr, 16);
    return (mask >> (signal - 1) & 1U) != 0;
  };
  EXPECT_TRUE(bit(inherited, "SigBlk", SIGUSR1)) << inherited;
  EXPECT_TRUE(bit(inherited, "SigIgn", SIGPIPE)) << inherited;
  EXPECT_FALSE(bit(clean, "SigBlk", SIGUSR1)) << clean;
  EXPECT_FALSE(bit(clean, "SigIgn", SIGPIPE)) << clean;
}

TEST_F(ChildSpawnTest, CloseFromKeepsThisProcessDescriptorsOutOfTheChild) {
  const int kept = ::open("/dev/null", O_RDONLY);  // not close-on-exec: it would leak
  ASSERT_GE(kept, 3);
  auto descriptors = [&](bool close_from) {
    const fs::path out = dir_ / (close_from ? "closed" : "open");
    ChildSpawn child;
    if (close_from) child.closeFrom(3);
    child.open(1, out.string(), ChildSpawn::kTruncate);
    const Result<pid_t> pid = child.start(std::vector<std::string>{
        "/bin/sh", "-c",
        "[ -e /proc/self/fd/" + std::to_string(kept) + " ] && echo open || echo closed"});
    EXPECT_TRUE(pid.ok());
    if (pid.ok()) waitExit(*pid);
    return read(out);
  };
  EXPECT_EQ(descriptors(false), "open\n");
  EXPECT_EQ(descriptors(true), "closed\n");
  ::close(kept);
}

TEST_F(ChildSpawnTest, AStartThatFailsSaysWhichProgramAndWhy) {
  ChildSpawn missing;
  const Result<pid_t> none = missing.start(std::vector<std::string>{"/nonexistent/prog"});
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.error().message, "cannot start '/nonexistent/prog': No such file or directory");

  ChildSpawn searched;
  const Result<pid_t> found =
      searched.start(std::vector<std::string>{"true"}, nullptr, /*search_path=*/true);
  ASSERT_TRUE(found.ok()) << found.error().message;
  EXPECT_EQ(waitExit(*found), 0);

  ChildSpawn empty;
  EXPECT_FALSE(empty.start(std::vector<std::string>{}).ok());

  // A working directory that is not there fails the start, not the child after it.
  ChildSpawn nowhere;
  nowhere.chdir((dir_ / "no-such-dir").string());
  const Result<pid_t> refused = nowhere.start(std::vector<std::string>{"/bin/true"});
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().message, "cannot start '/bin/true': No such file or directory");
}

}  // namespace
}  // namespace dockhand
