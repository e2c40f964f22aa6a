// End to end: a job of `library` runner tasks under the real driver and a real agent, the
// second stage reading the block the first one wrote (a job library of tests/fixtures/jobs).
#include <sys/stat.h>

#include <filesystem>
#include <regex>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/exit_codes.h"
#include "dockhand/protocol/messages.h"
#include "support/agent_command.h"
#include "support/fake_driver.h"
#include "support/http_client.h"
#include "support/process.h"

namespace dockhand::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using std::chrono_literals::operator""s;

class LibraryRunnerTest : public ::testing::Test {
 protected:
  // The test job library, copied where the runner trusts it (a private directory, 0755).
  std::string installLibrary() {
    fs::path lib_dir = dir.path() / "jobs";
    fs::create_directories(lib_dir);
    ::chmod(lib_dir.c_str(), 0755);
    fs::path to = lib_dir / "libtest-jobs.so";
    fs::copy_file(DOCKHAND_TEST_JOBS, to, fs::copy_options::overwrite_existing);
    ::chmod(to.c_str(), 0755);
    return to.string();
  }

  // An agent under a FakeDriver with the library runner configured by `runner_config`
  // (libraries added), and `agent_settings` in its config beside the plugins.
  std::unique_ptr<ChildProcess> startAgent(json runner_config,
                                           json agent_settings = json::object()) {
    runner_config["libraries"] = {{"test", installLibrary()}};
    const fs::path config = dir.path() / "agent.json";
    agent_settings["plugins"] = {{{"name", "library"}, {"config", runner_config}}};
    agent_settings["plugin_manifest_dir"] = (dir.path() / "no-manifests").string();
    writeFile(config, agent_settings.dump());
    const AgentCommand command{.config = config,
                               .driver_url = driver.url(),
                               .executor_id = "lib-1",
                               .app_id = "library-kill",
                               .cores = 4,
                               .work_dir = dir.path() / "work"};
    return std::make_unique<ChildProcess>(command.argv(), (dir.path() / "agent.log").string());
  }
  void launch(std::uint64_t id, const std::string& function, const json& args = nullptr) {
    protocol::LaunchTask message;
    message.task.task_id = id;
    message.task.name = function;
    message.task.runner = "library";
    message.task.payload = {{"library", "test"}, {"function", function}, {"args", args}};
    driver.send(protocol::makeMessage(message));
  }
  // Until task `id`'s function itself runs (it wrote its "ready" output): RUNNING comes just
  // before the call, and a kill that lands in between ends the task before its function runs.
  bool waitReady(std::uint64_t id) {
    const std::string name = "task-" + std::to_string(id);
    return waitUntil(
        [&] {
          std::error_code ec;
          for (fs::recursive_directory_iterator it(dir.path() / "work", ec), end; !ec && it != end;
               it.increment(ec)) {
            if (it->path().filename() == "ready" &&
                it->path().parent_path().parent_path().filename() == name) {
              return true;
            }
          }
          return false;
        },
        10s);
  }
  // Runs logLine as task `id` and reads its stdout log at the URL its FINISHED update gave;
  // then stops the agent.
  void expectLogged(ChildProcess& agent, std::uint64_t id) {
    launch(id, "logLine");
    auto finished = driver.waitForStatus(id, protocol::TaskState::kFinished, 10s);
    ASSERT_TRUE(finished) << agent.output();
    ASSERT_EQ(finished->log_urls.count("stdout"), 1U);
    HttpReply log = httpGet(finished->log_urls.at("stdout"));
    EXPECT_EQ(log.status, 200) << log.body;
    EXPECT_TRUE(std::regex_match(
        log.body, std::regex("[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:.]{12}Z INFO hello from the task\n")))
        << log.body;
    agent.signal(SIGTERM);
    EXPECT_EQ(agent.waitExit(15s), 0) << agent.output();
  }
  void kill(std::uint64_t id) {
    protocol::KillTask message;
    message.task_id = id;
    message.reason = "stage cancelled";
    driver.send(protocol::makeMessage(message));
  }

  TempDir dir;
  fs::path port_file_ = dir.path() / "port";
  FakeDriver driver;
};

// A task that polls cancelled() and one woken by its kill callback both end KILLED, with the
// kill's reason, and the agent goes on.
TEST_F(LibraryRunnerTest, KilledTasksThatPollOrListenEndKilled) {
  auto agent = startAgent(json::object());
  ASSERT_TRUE(driver.waitForRegistration(10s)) << agent->output();
  launch(1, "pollUntilCancelled");
  launch(2, "blockUntilKillCallback");
  ASSERT_TRUE(driver.waitForStatus(1, protocol::TaskState::kRunning, 10s)) << agent->output();
  ASSERT_TRUE(driver.waitForStatus(2, protocol::TaskState::kRunning, 10s)) << agent->output();
  ASSERT_TRUE(waitReady(1) && waitReady(2)) << agent->output();
  kill(1);
  kill(2);
  for (std::uint64_t id : {1, 2}) {
    auto killed = driver.waitForStatus(id, protocol::TaskState::kKilled, 10s);
    ASSERT_TRUE(killed) << agent->output();
    EXPECT_EQ(killed->reason, "stage cancelled");
  }
  launch(3, "echoArgs", {{"still", "here"}});
  auto finished = driver.waitForStatus(3, protocol::TaskState::kFinished, 10s);
  ASSERT_TRUE(finished) << agent->output();
  EXPECT_EQ(finished->result.value("value", ""), R"({"still":"here"})");
  agent->signal(SIGTERM);
  EXPECT_EQ(agent->waitExit(15s), 0) << agent->output();
}

// Spark's task reaper: a task that ignores its kill is reported KILLED after kill_timeout_ms,
// and with exit_on_unkillable the agent tells the driver and exits 12 (task-unkillable).
TEST_F(LibraryRunnerTest, TaskThatIgnoresItsKillEndsTheAgentWhenConfigured) {
  auto agent = startAgent({{"kill_timeout_ms", 500}, {"exit_on_unkillable", true}});
  ASSERT_TRUE(driver.waitForRegistration(10s)) << agent->output();
  launch(1, "ignoreKill", {{"ms", 20000}});
  ASSERT_TRUE(driver.waitForStatus(1, protocol::TaskState::kRunning, 10s)) << agent->output();
  ASSERT_TRUE(waitReady(1)) << agent->output();
  kill(1);
  auto killed = driver.waitForStatus(1, protocol::TaskState::kKilled, 10s);
  ASSERT_TRUE(killed) << agent->output();
  EXPECT_NE(killed->reason.find("kill_timeout_ms"), std::string::npos) << killed->reason;
  auto removed = driver.waitForType("RemoveExecutor", 10s);
  ASSERT_TRUE(removed) << agent->output();
  EXPECT_NE(removed->body.value("reason", "").find("plugin 'library' cannot recover: task 1"),
            std::string::npos)
      << removed->body.dump();
  EXPECT_EQ(agent->waitExit(15s), agent::toInt(agent::ExitCode::kTaskUnkillable))
      << agent->output();
}

// Without exit_on_unkillable the task is reported KILLED and the agent keeps serving; its
// thread is left to finish on its own.
TEST_F(LibraryRunnerTest, TaskThatIgnoresItsKillIsReportedKilledAndTheAgentGoesOn) {
  auto agent = startAgent({{"kill_timeout_ms", 300}});
  ASSERT_TRUE(driver.waitForRegistration(10s)) << agent->output();
  launch(1, "ignoreKill", {{"ms", 3000}});
  ASSERT_TRUE(driver.waitForStatus(1, protocol::TaskState::kRunning, 10s)) << agent->output();
  ASSERT_TRUE(waitReady(1)) << agent->output();
  kill(1);
  ASSERT_TRUE(driver.waitForStatus(1, protocol::TaskState::kKilled, 10s)) << agent->output();
  launch(2, "echoArgs", 7);
  EXPECT_TRUE(driver.waitForStatus(2, protocol::TaskState::kFinished, 10s)) << agent->output();
  agent->signal(SIGTERM);
  EXPECT_EQ(agent->waitExit(15s), 0) << agent->output();
}

// The library runner makes a task's directory itself, only when the task needs one
// (DH_RUNNER_MAKES_WORK_DIR): a task with no inputs, outputs or large result costs no
// directory; one that writes an output gets one, and the output still becomes a block.
TEST_F(LibraryRunnerTest, OnlyATaskThatWritesGetsADirectory) {
  auto agent = startAgent(json::object());
  ASSERT_TRUE(driver.waitForRegistration(10s)) << agent->output();
  auto task_dirs = [&] {
    std::vector<std::string> found;
    for (const auto& entry : fs::recursive_directory_iterator(dir.path() / "work")) {
      if (entry.is_directory() && entry.path().filename().string().rfind("task-", 0) == 0) {
        found.push_back(entry.path().filename().string());
      }
    }
    return found;
  };
  launch(1, "echoArgs", 1);
  ASSERT_TRUE(driver.waitForStatus(1, protocol::TaskState::kFinished, 10s)) << agent->output();
  EXPECT_TRUE(task_dirs().empty()) << "a task that wrote nothing got a directory";
  launch(2, "writeOutputs", {{"outputs", {{"rdd_2_0", {"x"}}}}});
  ASSERT_TRUE(driver.waitForStatus(2, protocol::TaskState::kFinished, 10s)) << agent->output();
  auto update = driver.waitForType("UpdateBlockInfo", 10s);
  ASSERT_TRUE(update) << agent->output();
  const auto added = protocol::decodeBody<protocol::UpdateBlockInfo>(update->body).added;
  ASSERT_EQ(added.size(), 1u) << update->body.dump();
  EXPECT_EQ(added[0].id, "rdd_2_0");
  EXPECT_EQ(task_dirs(), std::vector<std::string>{"task-2"});
  agent->signal(SIGTERM);
  EXPECT_EQ(agent->waitExit(15s), 0) << agent->output();
}

// The log link of a library task says why there is nothing to read: a task that wrote nothing
// never had a directory (and no I/O thread is woken to remove one), one that wrote outputs had
// its directory reclaimed past keep_task_dirs.
TEST_F(LibraryRunnerTest, LogLinksSayWhetherATaskHadADirectory) {
  auto agent = startAgent(json::object(), {{"keep_task_dirs", 1}});
  ASSERT_TRUE(driver.waitForRegistration(10s)) << agent->output();
  launch(1, "echoArgs", 1);
  ASSERT_TRUE(driver.waitForStatus(1, protocol::TaskState::kFinished, 10s)) << agent->output();
  for (std::uint64_t id : {2, 3}) {
    launch(id, "writeOutputs", {{"outputs", {{"rdd_" + std::to_string(id) + "_0", {"x"}}}}});
    ASSERT_TRUE(driver.waitForStatus(id, protocol::TaskState::kFinished, 10s)) << agent->output();
  }
  for (std::uint64_t id = 4; id <= 6; ++id) {  // more dirless tasks than keep_task_dirs
    launch(id, "echoArgs", 1);
    ASSERT_TRUE(driver.waitForStatus(id, protocol::TaskState::kFinished, 10s)) << agent->output();
  }
  auto log_of = [&](std::uint64_t id) {
    return httpGet(driver.agentBlockUrl() + "/v1/tasks/" + std::to_string(id) + "/logs/stdout");
  };
  for (std::uint64_t id : {1, 4, 6}) {
    HttpReply reply = log_of(id);
    EXPECT_EQ(reply.status, 404) << id;
    EXPECT_NE(reply.body.find("has no stdout file"), std::string::npos) << id << ": " << reply.body;
  }
  HttpReply reclaimed;
  EXPECT_TRUE(waitUntil(
      [&] {
        reclaimed = log_of(2);
        return reclaimed.body.find("reclaimed") != std::string::npos;
      },
      10s))
      << reclaimed.status << " " << reclaimed.body;
  const fs::path tasks = dir.path() / "work" / "tasks";
  EXPECT_TRUE(fs::exists(tasks / "task-3")) << "the newest directory is kept";
  EXPECT_TRUE(waitUntil([&] { return !fs::exists(tasks / "task-2"); }, 10s))
      << "reclaimed, but still there";
  EXPECT_FALSE(fs::exists(tasks / "task-1"));
  EXPECT_NE(log_of(404).body.find("unknown task 404"), std::string::npos);
  agent->signal(SIGTERM);
  EXPECT_EQ(agent->waitExit(15s), 0) << agent->output();
}

// A library task's stdout log is what it logged, on a thread and in a worker process alike; a
// task that logs gets a directory for it.
TEST_F(LibraryRunnerTest, ATasksLogLinkServesTheLinesItLogged) {
  auto agent = startAgent(json::object());
  ASSERT_TRUE(driver.waitForRegistration(10s)) << agent->output();
  expectLogged(*agent, 1);
}

TEST_F(LibraryRunnerTest, AWorkerProcessTasksLogLinkServesTheLinesItLogged) {
  auto agent = startAgent({{"worker_processes", 1}});
  ASSERT_TRUE(driver.waitForRegistration(10s)) << agent->output();
  expectLogged(*agent, 1);
}

// Worker processes: a task that crashes costs its worker, not the agent; it is reported FAILED
// with the signal, the worker is replaced, and a task that ignores its kill costs its worker
// too (no reaper exit needed). The workers end with the agent.
TEST_F(LibraryRunnerTest, InWorkerProcessesACrashCostsAWorkerNotTheAgent) {
  auto agent = startAgent({{"worker_processes", 2}, {"kill_timeout_ms", 300}});
  ASSERT_TRUE(driver.waitForRegistration(10s)) << agent->output();
  launch(1, "crash");
  auto failed = driver.waitForStatus(1, protocol::TaskState::kFailed, 10s);
  ASSERT_TRUE(failed) << agent->output();
  EXPECT_NE(failed->reason.find("died: signal 6 (SIGABRT)"), std::string::npos) << failed->reason;
  launch(2, "ignoreKill", {{"ms", 20000}});
  ASSERT_TRUE(driver.waitForStatus(2, protocol::TaskState::kRunning, 10s)) << agent->output();
  ASSERT_TRUE(waitReady(2)) << agent->output();
  kill(2);
  auto killed = driver.waitForStatus(2, protocol::TaskState::kKilled, 10s);
  ASSERT_TRUE(killed) << agent->output();
  EXPECT_NE(killed->reason.find("its worker process"), std::string::npos) << killed->reason;
  std::vector<pid_t> workers;
  for (std::uint64_t id : {3, 4}) {
    launch(id, "processId");
    auto finished = driver.waitForStatus(id, protocol::TaskState::kFinished, 10s);
    ASSERT_TRUE(finished) << agent->output();
    workers.push_back(std::stoi(finished->result.value("value", "0")));
    EXPECT_NE(workers.back(), agent->pid());
  }
  agent->signal(SIGTERM);
  EXPECT_EQ(agent->waitExit(15s), 0) << agent->output();
  for (pid_t worker : workers) {
    EXPECT_TRUE(waitUntil([&] { return processGone(worker); }, 10s))
        << "worker " << worker << " outlived the agent";
  }
}

TEST_F(LibraryRunnerTest, SecondStageReadsTheBlockTheFirstStageWrote) {
  const fs::path agent_config = dir.path() / "agent.json";
  writeFile(
      agent_config,
      json{{"plugins",
            {{{"name", "process"}},
             {{"name", "library"}, {"config", {{"libraries", {{"test", installLibrary()}}}}}}}}}
          .dump());
  const fs::path consumed = dir.path() / "consumed.txt";
  const json job = {{"name", "library-job"},
                    {"tasks",
                     {{{"name", "produce"},
                       {"runner", "library"},
                       {"payload",
                        {{"library", "test"},
                         {"function", "writeOutputs"},
                         {"args", {{"outputs", {{"rdd_1_0", {"hello ", "blocks"}}}}}}}},
                       {"outputs", {"rdd_1_0"}}},
                      {{"name", "consume"},
                       {"runner", "library"},
                       {"payload",
                        {{"library", "test"},
                         {"function", "copyInputsToFile"},
                         {"args", {{"path", consumed.string()}}}}},
                       {"inputs", {"rdd_1_0"}}}}}};
  const fs::path job_file = dir.path() / "job.json";
  writeFile(job_file, job.dump(2));

  std::vector<std::string> argv = {driverBinary(),
                                   "run",
                                   job_file.string(),
                                   "--local-agents",
                                   "0",
                                   "--min-agents",
                                   "1",
                                   "--timeout",
                                   "90",
                                   "--listen",
                                   "127.0.0.1:0",
                                   "--port-file",
                                   port_file_.string()};
  ChildProcess driver_process(argv, (dir.path() / "driver.log").string());
  ASSERT_TRUE(waitUntil([&] { return fs::exists(port_file_); }, 10s)) << driver_process.output();
  const int port = std::stoi(readFile(port_file_));
  const AgentCommand command{.config = agent_config,
                             .driver_url = "ws://127.0.0.1:" + std::to_string(port) + "/",
                             .executor_id = "agent-1",
                             .app_id = "library-runner-test",
                             .work_dir = dir.path() / "work"};
  ChildProcess agent(command.argv(), (dir.path() / "agent.log").string());

  auto exit_code = driver_process.waitExit(120s);
  ASSERT_TRUE(exit_code.has_value()) << driver_process.output() << agent.output();
  EXPECT_EQ(*exit_code, 0) << driver_process.output() << agent.output();
  EXPECT_NE(driver_process.output().find("job library-job SUCCEEDED"), std::string::npos)
      << driver_process.output() << agent.output();
  EXPECT_EQ(readFile(consumed), "hello blocks") << agent.output();
}

}  // namespace
}  // namespace dockhand::testing
