// Least privilege with the real `dockhand` program: a root agent whose `process` runner runs
// tasks as `nobody`, with a scrubbed environment and resource limits, while the agent's work
// directory, the other tasks' directories and the block files stay out of their reach.
// Skipped unless the tests run as root.
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "dockhand/protocol/messages.h"
#include "support/agent_command.h"
#include "support/fake_driver.h"
#include "support/process.h"

namespace dockhand::testing {
namespace {

namespace fs = std::filesystem;
namespace proto = dockhand::protocol;
using nlohmann::json;
using std::chrono_literals::operator""s;

struct stat statOf(const fs::path& path) {
  struct stat st {};
  EXPECT_EQ(::lstat(path.c_str(), &st), 0) << path;
  return st;
}

class PrivilegeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root: the agent runs tasks as another user";
    // The work directory's parent must let the task user pass, as /var/lib does.
    fs::permissions(dir.path(),
                    fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec);
  }
  fs::path workDir() const { return dir.path() / "work"; }

  // `settings`: more of the agent's config (keep_task_dirs, say).
  std::unique_ptr<ChildProcess> startAgent(const FakeDriver& driver, const json& runner_config,
                                           json settings = json::object()) {
    const auto config = dir.path() / "agent.json";
    json plugin = {{"name", "process"}};
    if (!runner_config.is_null()) plugin["config"] = runner_config;
    settings["plugins"] = {plugin};
    settings["plugin_manifest_dir"] = (dir.path() / "no-manifests").string();
    writeFile(config, settings.dump());
    const AgentCommand command{.config = config,
                               .driver_url = driver.url(),
                               .executor_id = "p1",
                               .app_id = "privilege",
                               .work_dir = workDir()};
    return std::make_unique<ChildProcess>(
        command.argv(), (dir.path() / "agent.log").string(),
        std::vector<std::string>{"DOCKHAND_TEST_SECRET=agent-only", "PRIV_TEST_ALLOWED=yes",
                                 "PRIV_TEST_OTHER=no"});
  }
  static proto::Envelope launch(std::uint64_t task_id, const json& payload,
                                std::vector<proto::InputBlock> inputs = {}) {
    proto::LaunchTask msg;
    msg.task.task_id = task_id;
    msg.task.name = "t" + std::to_string(task_id);
    msg.task.payload = payload;
    msg.task.inputs = std::move(inputs);
    return proto::makeMessage(msg);
  }

  TempDir dir;
};

TEST_F(PrivilegeTest, TasksRunAsNobodyConfinedAndTheirOutputsBecomeBlocks) {
  FakeDriver driver;
  auto agent = startAgent(
      driver,
      {{"user", "nobody"},
       {"group", "nogroup"},
       {"env_allow", {"PRIV_TEST_ALLOWED"}},
       {"limits", {{"open_files", 256}, {"processes", 512}, {"address_space_bytes", 2147483648}}}});
  ASSERT_TRUE(driver.waitForRegistration(10s)) << agent->output();

  // Who it runs as, what it sees, its limits; it writes an output block and a file.
  driver.send(launch(
      1, {{"shell",
           "id -u; id -g; id -G; echo \"secret=${DOCKHAND_TEST_SECRET-unset} "
           "allowed=${PRIV_TEST_ALLOWED-unset} other=${PRIV_TEST_OTHER-unset}\"; "
           "/bin/bash -c 'ulimit -n; ulimit -u; ulimit -v'; "
           "head -c 5000 /dev/urandom > $DOCKHAND_OUTPUT_DIR/shuffle_0_1_0; echo mine > mine"}}));
  auto first = driver.waitForStatus(1, proto::TaskState::kFinished);
  ASSERT_TRUE(first) << agent->output();
  EXPECT_EQ(first->result["stdout"],
            "65534\n65534\n65534\nsecret=unset allowed=yes other=unset\n256\n512\n2097152\n");
  std::vector<proto::BlockInfo> added;
  for (const auto& frame : driver.history()) {
    if (frame.type != "UpdateBlockInfo") continue;
    for (auto& b : proto::decodeBody<proto::UpdateBlockInfo>(frame.body).added) added.push_back(b);
  }
  ASSERT_EQ(added.size(), 1u) << agent->output();
  const proto::BlockInfo block = added.front();
  EXPECT_EQ(block.id, "shuffle_0_1_0");
  EXPECT_EQ(block.size, 5000u);

  // The block file and what is around it are the agent's and private.
  auto block_file = statOf(workDir() / "blocks" / "shuffle_0_1_0");
  EXPECT_EQ(block_file.st_uid, 0u);
  EXPECT_EQ(block_file.st_mode & 07777, 0600u);
  EXPECT_EQ(statOf(workDir() / "blocks").st_mode & 07777, 0700u);
  EXPECT_EQ(statOf(workDir()).st_mode & 07777, 0711u);
  EXPECT_EQ(statOf(workDir() / "tasks").st_mode & 07777, 0711u);
  auto first_dir = statOf(workDir() / "tasks" / "task-1");
  EXPECT_EQ(first_dir.st_uid, 0u);
  EXPECT_EQ(first_dir.st_mode & 07777, 0700u);
  EXPECT_EQ(statOf(workDir() / "tasks" / "task-1" / "mine").st_uid, 0u);

  // A second task gets the block as an input (fetched from the block server), and can read
  // neither the agent's work directory, nor the first task's directory, nor the block files.
  const std::string probe =
      "wc -c < $DOCKHAND_INPUT_DIR/shuffle_0_1_0; "
      "W=$(dirname $(dirname $(dirname $DOCKHAND_OUTPUT_DIR))); "
      R"(for c in "ls $W" "ls $W/tasks" "ls $W/tasks/task-1" "cat $W/tasks/task-1/mine" )"
      R"("ls $W/blocks" "cat $W/blocks/shuffle_0_1_0"; do )"
      "if $c > /dev/null 2> err; then echo \"$c: read\"; "
      "else echo \"$c: $(grep -o 'Permission denied' err)\"; fi; "
      "done | sed \"s|$W|W|\"";
  driver.send(launch(
      2, {{"shell", probe}},
      {proto::InputBlock{
          .id = block.id, .url = block.url, .size = block.size, .checksum = block.checksum}}));
  auto second = driver.waitForStatus(2, proto::TaskState::kFinished);
  ASSERT_TRUE(second) << agent->output();
  EXPECT_EQ(second->result["stdout"],
            "5000\n"
            "ls W: Permission denied\n"
            "ls W/tasks: Permission denied\n"
            "ls W/tasks/task-1: Permission denied\n"
            "cat W/tasks/task-1/mine: Permission denied\n"
            "ls W/blocks: Permission denied\n"
            "cat W/blocks/shuffle_0_1_0: Permission denied\n");

  // A program that does not exist: the task fails, and the reason says why.
  driver.send(launch(3, {{"command", {"/nonexistent/prog"}}}));
  auto failed = driver.waitForStatus(3, proto::TaskState::kFailed);
  ASSERT_TRUE(failed) << agent->output();
  EXPECT_NE(failed->reason.find("cannot start '/nonexistent/prog': No such file or directory"),
            std::string::npos)
      << failed->reason;
  EXPECT_EQ(agent->output().find("tasks run as root"), std::string::npos) << agent->output();
}

// An ended task's directory reused for the next task (keep_task_dirs 0): the next task, as
// the task user too, finds it its own and empty, whatever the one before left in it or did
// to its modes.
TEST_F(PrivilegeTest, AReusedTaskDirectoryComesBackEmptyAndTheTaskUsers) {
  FakeDriver driver;
  auto agent = startAgent(driver, {{"user", "nobody"}}, {{"keep_task_dirs", 0}});
  ASSERT_TRUE(driver.waitForRegistration(10s)) << agent->output();
  const std::string script =
      "stat -c '%i %U %a' . output input; ls -A; ls -A output input | tr '\\n' ' '; echo;"
      " echo left > junk; mkdir -p scratch/deep; echo x > stdout-copy;"
      " echo data > $DOCKHAND_OUTPUT_DIR/rdd_${DOCKHAND_TASK_ID}_0; chmod 000 output; chmod 500 .";
  std::vector<std::string> seen;
  for (std::uint64_t id = 1; id <= 3; ++id) {
    driver.send(launch(id, {{"shell", script}}));
    auto done = driver.waitForStatus(id, proto::TaskState::kFinished);
    ASSERT_TRUE(done) << agent->output();
    seen.push_back(done->result["stdout"].get<std::string>());
    // Reclaimed (cleared into tasks/spare/) before the next task starts.
    const fs::path task_dir = workDir() / "tasks" / ("task-" + std::to_string(id));
    EXPECT_TRUE(waitUntil([&] { return !fs::exists(task_dir); }, 10s)) << agent->output();
  }
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_EQ(seen[1], seen[0]);
  EXPECT_EQ(seen[2], seen[0]);
  // The task user's, 0700, with only what the agent puts there, and empty.
  const std::string& report = seen[0];
  EXPECT_NE(report.find(" nobody 700\n"), std::string::npos) << report;
  EXPECT_NE(report.find("input\noutput\nstderr\nstdout\n"), std::string::npos) << report;
  EXPECT_NE(report.find("input:  output: \n"), std::string::npos) << report;
}

TEST_F(PrivilegeTest, RootAgentWithoutUserWarnsThatTasksRunAsRoot) {
  FakeDriver driver;
  auto agent = startAgent(driver, nullptr);
  ASSERT_TRUE(driver.waitForRegistration(10s)) << agent->output();
  EXPECT_NE(agent->output().find("config/user is not set: tasks run as root"), std::string::npos)
      << agent->output();
  // Even as root, the agent's own variables stay out of the task's environment.
  driver.send(launch(1, {{"shell", "id -u; echo ${DOCKHAND_TEST_SECRET-unset} $PRIV_TEST_OTHER"}}));
  auto done = driver.waitForStatus(1, proto::TaskState::kFinished);
  ASSERT_TRUE(done) << agent->output();
  EXPECT_EQ(done->result["stdout"], "0\nunset no\n");
}

}  // namespace
}  // namespace dockhand::testing
