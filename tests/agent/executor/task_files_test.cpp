// The task_json a runner gets (what runnerTaskJson puts in it from a TaskDescription), and an
// ended task's directory cleared for another task (clearForReuse) or seen to hold nothing
// (lookAtEndedDir), on real files.
#include "executor/task_files.h"

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <functional>
#include <set>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "test_processes.h"

namespace dockhand::agent {
namespace {

using nlohmann::json;

TEST(RunnerTaskJsonTest, ListsInputIdsInTheTasksOrder) {
  protocol::TaskDescription task;
  task.task_id = 7;
  task.inputs = {{"shuffle_0_3_1", "http://a/blocks/shuffle_0_3_1", 10, ""},
                 {"rdd_2_0", "http://b/blocks/rdd_2_0", 4, ""}};
  json launched = json::parse(runnerTaskJson(task, "/tmp/task-7", "exec-1"));
  EXPECT_EQ(launched.at("inputs"), json::array({"shuffle_0_3_1", "rdd_2_0"}));
  EXPECT_EQ(launched.at("work_dir"), "/tmp/task-7");
  EXPECT_EQ(launched.at("env").at("DOCKHAND_INPUT_DIR"), "/tmp/task-7/input");
}

// DH_RUNNER_NO_TASK_ENV: a runner that does not read "env" gets every other member.
TEST(RunnerTaskJsonTest, EnvIsLeftOutForARunnerThatDoesNotReadIt) {
  protocol::TaskDescription task;
  task.task_id = 7;
  task.name = "map";
  task.resources = {{"gpu", {"0"}}};
  json with = json::parse(runnerTaskJson(task, "/tmp/task-7", "exec-1"));
  json without = json::parse(runnerTaskJson(task, "/tmp/task-7", "exec-1", TaskEnv::kLeftOut));
  EXPECT_EQ(with.at("env").at("CUDA_VISIBLE_DEVICES"), "0");
  EXPECT_FALSE(without.contains("env"));
  with.erase("env");
  EXPECT_EQ(without, with);
}

TEST(RunnerTaskJsonTest, InputsIsAnEmptyArrayWithoutInputs) {
  protocol::TaskDescription task;
  task.task_id = 8;
  json launched = json::parse(runnerTaskJson(task, "/tmp/task-8", "exec-1"));
  EXPECT_EQ(launched.at("inputs"), json::array());
}

// Every member, as the runner ABI documents them (docs/plugins.md), and strings escaped: what a
// JSON tree of the same values would have been.
TEST(RunnerTaskJsonTest, CarriesEveryMemberAsJson) {
  protocol::TaskDescription task;
  task.task_id = 9;
  task.attempt = 2;
  task.name = "map \"0\"\n";
  task.partition = 3;
  task.cpus = 2;
  task.resources = {{"gpu", {"0", "1"}}, {"my.fpga", {"f0"}}};
  task.properties = {{"spark.x", "1"}, {"quote", "a\"b"}};
  task.payload = {{"command", {"/bin/echo", "\u00e9t\u00e9"}}, {"env", {{"A", "b"}}}};
  task.inputs = {{"rdd_1_0", "http://a/blocks/rdd_1_0", 4, ""}};
  const json launched = json::parse(runnerTaskJson(task, "/w/tasks/task-9", "exec \"1\""));
  const json expected = {{"task_id", 9},
                         {"attempt", 2},
                         {"name", "map \"0\"\n"},
                         {"partition", 3},
                         {"cpus", 2},
                         {"resources", {{"gpu", {"0", "1"}}, {"my.fpga", {"f0"}}}},
                         {"properties", {{"spark.x", "1"}, {"quote", "a\"b"}}},
                         {"payload", task.payload},
                         {"work_dir", "/w/tasks/task-9"},
                         {"env",
                          {{"DOCKHAND_TASK_ID", "9"},
                           {"DOCKHAND_TASK_ATTEMPT", "2"},
                           {"DOCKHAND_TASK_NAME", "map \"0\"\n"},
                           {"DOCKHAND_PARTITION", "3"},
                           {"DOCKHAND_EXECUTOR_ID", "exec \"1\""},
                           {"DOCKHAND_CPUS", "2"},
                           {"DOCKHAND_OUTPUT_DIR", "/w/tasks/task-9/output"},
                           {"DOCKHAND_INPUT_DIR", "/w/tasks/task-9/input"},
                           {"DOCKHAND_RESOURCE_GPU", "0,1"},
                           {"CUDA_VISIBLE_DEVICES", "0,1"},
                           {"DOCKHAND_RESOURCE_MY_FPGA", "f0"}}},
                         {"inputs", {"rdd_1_0"}}};
  EXPECT_EQ(launched, expected) << launched.dump(2);
}

TEST(RunnerTaskJsonTest, BytesThatAreNotUtf8AreReplaced) {
  protocol::TaskDescription task;
  task.name = std::string("bad\xff");
  const json launched = json::parse(runnerTaskJson(task, "/w/tasks/task-1", "e"));
  EXPECT_EQ(launched.at("name"), "bad\xEF\xBF\xBD");
}

namespace fs = std::filesystem;

ino_t inodeOf(const fs::path& path) {
  struct stat st {};
  EXPECT_EQ(::lstat(path.c_str(), &st), 0) << path;
  return st.st_ino;
}

std::set<std::string> namesIn(const fs::path& dir) {
  std::set<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) {
    names.insert(entry.path().filename().string());
  }
  return names;
}

void writeText(const fs::path& path, const std::string& text) { std::ofstream(path) << text; }

class ClearForReuseTest : public ::testing::Test {
 protected:
  // A task's directory as the agent makes it, with what a task may leave in it.
  ClearForReuseTest() {
    fs::create_directories(dir_ / "input");
    fs::create_directories(dir_ / "output");
    writeText(dir_ / "stdout", "");
    writeText(dir_ / "stderr", "");
  }

  dockhand::testing::TempDir tmp_;
  fs::path dir_ = tmp_.path() / "task-1";
};

TEST_F(ClearForReuseTest, KeepsTheDirectoriesAndEmptyOutputFilesAndRemovesTheRest) {
  const auto kept = {dir_, dir_ / "input", dir_ / "output", dir_ / "stdout", dir_ / "stderr"};
  std::vector<ino_t> before;
  for (const auto& path : kept) before.push_back(inodeOf(path));
  writeText(dir_ / "input" / "rdd_1_0", "block");
  writeText(dir_ / "output" / "not a block", "x");
  fs::create_directories(dir_ / "scratch" / "deep");
  writeText(dir_ / "scratch" / "deep" / "file", "x");
  fs::create_directory(tmp_.path() / "outside");
  writeText(tmp_.path() / "outside" / "keep", "x");
  fs::create_directory_symlink(tmp_.path() / "outside", dir_ / "link");
  fs::permissions(dir_ / "output", fs::perms::none);
  fs::permissions(dir_, fs::perms::owner_read | fs::perms::owner_exec | fs::perms::others_all);

  ASSERT_TRUE(clearForReuse(dir_).ok());

  EXPECT_EQ(namesIn(dir_), (std::set<std::string>{"input", "output", "stderr", "stdout"}));
  EXPECT_TRUE(namesIn(dir_ / "input").empty());
  EXPECT_TRUE(namesIn(dir_ / "output").empty());
  std::vector<ino_t> after;
  for (const auto& path : kept) after.push_back(inodeOf(path));
  EXPECT_EQ(after, before);
  EXPECT_EQ(fs::status(dir_).permissions(), fs::perms::owner_all);
  EXPECT_EQ(fs::status(dir_ / "output").permissions(),
            fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                fs::perms::others_read | fs::perms::others_exec);
  EXPECT_TRUE(fs::exists(tmp_.path() / "outside" / "keep"));  // the link went, not followed
}

TEST_F(ClearForReuseTest, AWrittenOrLinkedOutputFileGoesWithItsInode) {
  writeText(dir_ / "stdout", "what the last task printed\n");
  fs::remove(dir_ / "stderr");
  writeText(tmp_.path() / "elsewhere", "");
  fs::create_hard_link(tmp_.path() / "elsewhere", dir_ / "stderr");

  ASSERT_TRUE(clearForReuse(dir_).ok());

  EXPECT_EQ(namesIn(dir_), (std::set<std::string>{"input", "output"}));
  EXPECT_TRUE(fs::exists(tmp_.path() / "elsewhere"));
}

TEST_F(ClearForReuseTest, SubdirectoriesThatAreNotDirectoriesAreMadeAgain) {
  fs::remove(dir_ / "input");
  fs::create_directory_symlink(tmp_.path(), dir_ / "input");  // would empty the test's dir
  fs::remove(dir_ / "output");
  writeText(dir_ / "output", "a file");

  ASSERT_TRUE(clearForReuse(dir_).ok());

  EXPECT_TRUE(fs::is_directory(fs::symlink_status(dir_ / "input")));
  EXPECT_TRUE(fs::is_directory(fs::symlink_status(dir_ / "output")));
  EXPECT_TRUE(fs::exists(dir_ / "stdout"));  // the link's target was not emptied
}

TEST_F(ClearForReuseTest, RefusesWhatIsNotADirectoryAndLeavesItAlone) {
  const fs::path link = tmp_.path() / "task-2";
  fs::create_directory_symlink(dir_, link);
  writeText(dir_ / "stdout", "kept\n");

  EXPECT_FALSE(clearForReuse(link).ok());
  EXPECT_FALSE(clearForReuse(tmp_.path() / "missing").ok());
  EXPECT_EQ(dockhand::testing::readFile(dir_ / "stdout"), "kept\n");
}

// lookAtEndedDir: a directory a task left as it got it, and each thing that is not that.
class LookAtEndedDirTest : public ::testing::Test {
 protected:
  LookAtEndedDirTest() { makeAsNew(); }

  // dir_ as the agent makes a task's directory and the process runner its files in it.
  void makeAsNew() {
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "input");
    fs::create_directories(dir_ / "output");
    writeText(dir_ / "stdout", "");
    writeText(dir_ / "stderr", "");
    fs::permissions(dir_, fs::perms::owner_all);
    for (const char* sub : {"input", "output"}) {
      fs::permissions(dir_ / sub, fs::perms::owner_all | fs::perms::group_read |
                                      fs::perms::group_exec | fs::perms::others_read |
                                      fs::perms::others_exec);
    }
  }

  dockhand::testing::TempDir tmp_;
  fs::path dir_ = tmp_.path() / "task-1";
};

TEST_F(LookAtEndedDirTest, ADirectoryAsATaskGetsItIsNothing) {
  EXPECT_EQ(lookAtEndedDir(dir_), LeftInDir::kNothing);
  EXPECT_EQ(lookAtEndedDir(tmp_.path() / "missing"), LeftInDir::kNoDirectory);
  // A runner that writes no stdout or stderr file leaves none.
  fs::remove(dir_ / "stdout");
  fs::remove(dir_ / "stderr");
  EXPECT_EQ(lookAtEndedDir(dir_), LeftInDir::kNothing);
  // What clearForReuse leaves is that too.
  writeText(dir_ / "stdout", "printed\n");
  writeText(dir_ / "output" / "rdd_0_0", "x");
  ASSERT_TRUE(clearForReuse(dir_).ok());
  writeText(dir_ / "stdout", "");
  EXPECT_EQ(lookAtEndedDir(dir_), LeftInDir::kNothing);
}

TEST_F(LookAtEndedDirTest, AnythingWrittenOrChangedIsSomething) {
  const std::vector<std::pair<std::string, std::function<void()>>> changes = {
      {"a line in stdout", [&] { writeText(dir_ / "stdout", "x"); }},
      {"a line in stderr", [&] { writeText(dir_ / "stderr", "x"); }},
      {"an output", [&] { writeText(dir_ / "output" / "rdd_0_0", "x"); }},
      {"a file in input/", [&] { writeText(dir_ / "input" / "left", ""); }},
      {"a file beside them", [&] { writeText(dir_ / "junk", ""); }},
      {"a directory beside them", [&] { fs::create_directory(dir_ / "scratch"); }},
      {"no output/", [&] { fs::remove(dir_ / "output"); }},
      {"stdout a link",
       [&] {
         fs::remove(dir_ / "stdout");
         writeText(tmp_.path() / "empty", "");
         fs::create_symlink(tmp_.path() / "empty", dir_ / "stdout");
       }},
      {"stdout a hard link",
       [&] {
         writeText(tmp_.path() / "other", "");
         fs::remove(dir_ / "stdout");
         fs::create_hard_link(tmp_.path() / "other", dir_ / "stdout");
       }},
      {"output/ a link",
       [&] {
         fs::remove(dir_ / "output");
         fs::create_directory(tmp_.path() / "elsewhere");
         fs::create_directory_symlink(tmp_.path() / "elsewhere", dir_ / "output");
       }},
      {"the directory's mode",
       [&] { fs::permissions(dir_, fs::perms::others_read, fs::perm_options::add); }},
      {"input/'s mode",
       [&] { fs::permissions(dir_ / "input", fs::perms::group_write, fs::perm_options::add); }},
  };
  for (const auto& [what, change] : changes) {
    SCOPED_TRACE(what);
    fs::remove_all(tmp_.path() / "elsewhere");
    fs::remove(tmp_.path() / "empty");
    fs::remove(tmp_.path() / "other");
    makeAsNew();
    ASSERT_EQ(lookAtEndedDir(dir_), LeftInDir::kNothing);
    change();
    EXPECT_EQ(lookAtEndedDir(dir_), LeftInDir::kSomething);
  }
  // A link in place of the directory itself is not followed.
  fs::create_directory_symlink(dir_, tmp_.path() / "task-2");
  EXPECT_EQ(lookAtEndedDir(tmp_.path() / "task-2"), LeftInDir::kSomething);
}

}  // namespace
}  // namespace dockhand::agent
