// Integration tests of the real `dockhand` program against a scripted driver on 127.0.0.1.
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include <Poco/Net/ServerSocket.h>
#include <Poco/Net/StreamSocket.h>
#include <gtest/gtest.h>

#include "dockhand/protocol/messages.h"
#include "support/agent_command.h"
#include "support/fake_driver.h"
#include "support/http_client.h"
#include "support/process.h"

namespace dockhand::testing {
namespace {

namespace proto = dockhand::protocol;
using std::chrono_literals::operator""ms;
using std::chrono_literals::operator""s;

class AgentProcessTest : public ::testing::Test {
 protected:
  AgentCommand agentCommand(const std::string& driver_url, const std::string& id = "a1") {
    return {.driver_url = driver_url, .executor_id = id, .work_dir = dir.path() / ("work-" + id)};
  }
  std::unique_ptr<ChildProcess> startAgent(const std::vector<std::string>& args,
                                           const std::string& log = "agent.log") {
    return std::make_unique<ChildProcess>(args, (dir.path() / log).string());
  }
  proto::Envelope launch(std::uint64_t task_id, const proto::Json& payload) {
    proto::LaunchTask msg;
    msg.task.task_id = task_id;
    msg.task.name = "t" + std::to_string(task_id);
    msg.task.payload = payload;
    return proto::makeMessage(msg);
  }
  // Reads the pids a task wrote, one per line, once `count` are there.
  std::vector<pid_t> readPids(const std::filesystem::path& file, std::size_t count) {
    std::vector<pid_t> pids;
    waitUntil(
        [&] {
          pids.clear();
          std::istringstream in(readFile(file));
          pid_t p = 0;
          while (in >> p) pids.push_back(p);
          return pids.size() >= count;
        },
        10s);
    return pids;
  }

  TempDir dir;
};

TEST_F(AgentProcessTest, RegistersAndSendsHeartbeats) {
  FakeDriver driver;
  auto agent = startAgent(agentCommand(driver.url()).argv());
  ASSERT_TRUE(driver.waitForRegistration(10s)) << agent->output();
  auto beat = driver.waitForType("Heartbeat", 5s);
  ASSERT_TRUE(beat.has_value()) << agent->output();
  EXPECT_EQ(proto::decodeBody<proto::Heartbeat>(beat->body).executor_id, "a1");
  EXPECT_TRUE(agent->running());
}

TEST_F(AgentProcessTest, RunsTaskAndReportsItsOutput) {
  FakeDriver driver;
  auto agent = startAgent(agentCommand(driver.url()).argv());
  ASSERT_TRUE(driver.waitForRegistration(10s)) << agent->output();
  // A task that ends before its RUNNING has left skips it (protocol.md 7.2); the launch no
  // longer waits for the exec, so a busy machine could see that for a task of a few
  // milliseconds. This one runs long enough for its RUNNING to go first.
  driver.send(launch(1, {{"shell", "sleep 0.3; echo hello from $DOCKHAND_TASK_ID"}}));
  ASSERT_TRUE(driver.waitForStatus(1, proto::TaskState::kRunning)) << agent->output();
  auto done = driver.waitForStatus(1, proto::TaskState::kFinished);
  ASSERT_TRUE(done) << agent->output();
  EXPECT_EQ(done->result["stdout"], "hello from 1\n");
}

TEST_F(AgentProcessTest, KillTaskKillsTheWholeProcessTree) {
  FakeDriver driver;
  auto agent = startAgent(agentCommand(driver.url()).argv());
  ASSERT_TRUE(driver.waitForRegistration(10s)) << agent->output();
  auto pid_file = dir.path() / "pids";
  std::string script = "sleep 300 & echo $! >> " + pid_file.string() + "; sh -c 'echo $$ >> " +
                       pid_file.string() + "; exec sleep 300' & echo $$ >> " + pid_file.string() +
                       "; wait";
  driver.send(launch(7, {{"shell", script}}));
  auto pids = readPids(pid_file, 3);
  ASSERT_EQ(pids.size(), 3u) << agent->output();
  proto::KillTask kill;
  kill.task_id = 7;
  kill.reason = "test kill";
  driver.send(proto::makeMessage(kill));
  auto killed = driver.waitForStatus(7, proto::TaskState::kKilled);
  ASSERT_TRUE(killed) << agent->output();
  EXPECT_EQ(killed->reason, "test kill");
  for (pid_t pid : pids) {
    EXPECT_TRUE(waitUntil([&] { return processGone(pid); }, 5s)) << "pid " << pid << " survived";
  }
  EXPECT_TRUE(agent->running());
}

TEST_F(AgentProcessTest, KillThatOvertakesItsLaunchStillStopsTheTask) {
  FakeDriver driver;
  auto agent = startAgent(agentCommand(driver.url()).argv());
  ASSERT_TRUE(driver.waitForRegistration(10s)) << agent->output();
  proto::KillTask kill;
  kill.task_id = 9;
  kill.reason = "cancelled early";
  driver.send(proto::makeMessage(kill));
  driver.send(launch(9, {{"shell", "sleep 300"}}));
  auto killed = driver.waitForStatus(9, proto::TaskState::kKilled);
  ASSERT_TRUE(killed) << agent->output();
  EXPECT_EQ(killed->reason, "cancelled early");
}

TEST_F(AgentProcessTest, FailingTaskReportsExitCodeAndStderr) {
  FakeDriver driver;
  auto agent = startAgent(agentCommand(driver.url()).argv());
  ASSERT_TRUE(driver.waitForRegistration(10s)) << agent->output();
  driver.send(launch(3, {{"shell", "echo broken >&2; exit 3"}}));
  auto failed = driver.waitForStatus(3, proto::TaskState::kFailed);
  ASSERT_TRUE(failed) << agent->output();
  EXPECT_EQ(failed->exit_code, 3);
  EXPECT_NE(failed->stderr_tail.find("broken"), std::string::npos);
}

// Ended tasks' directories: the newest keep_task_dirs stay (stdout, stderr for a look), older
// ones go once their outputs became blocks (cleared into tasks/spare/ for new tasks, or
// removed); the blocks stay.
TEST_F(AgentProcessTest, KeepsOnlyTheNewestEndedTaskDirectories) {
  FakeDriver driver;
  const auto config = dir.path() / "agent.json";
  writeFile(config, R"({"keep_task_dirs": 2})");
  auto command = agentCommand(driver.url());
  command.config = config;
  auto agent = startAgent(command.argv());
  ASSERT_TRUE(driver.waitForRegistration(10s)) << agent->output();
  for (std::uint64_t id = 1; id <= 5; ++id) {
    // Task 3 fails: a failed task's directory counts as any other.
    driver.send(launch(id, {{"shell",
                             "echo out > \"$DOCKHAND_OUTPUT_DIR/task_${DOCKHAND_TASK_ID}_o\";"
                             " echo log; [ $DOCKHAND_TASK_ID -ne 3 ]"}}));
    const auto state = id == 3 ? proto::TaskState::kFailed : proto::TaskState::kFinished;
    ASSERT_TRUE(driver.waitForStatus(id, state)) << agent->output();
  }
  const auto tasks = dir.path() / "work-a1" / "tasks";
  auto listing = [&] {
    std::set<std::string> names;
    for (const auto& entry : std::filesystem::directory_iterator(tasks)) {
      if (entry.path().filename() != "spare") names.insert(entry.path().filename().string());
    }
    return names;
  };
  const std::set<std::string> newest = {"task-4", "task-5"};
  EXPECT_TRUE(waitUntil([&] { return listing() == newest; }, 10s))
      << "left: " << ::testing::PrintToString(listing());
  EXPECT_EQ(readFile(tasks / "task-5" / "stdout"), "log\n");
  for (const char* id : {"task_1_o", "task_2_o", "task_4_o", "task_5_o"}) {
    EXPECT_EQ(httpRequest("HEAD", driver.agentBlockUrl() + "/blocks/" + id).status, 200) << id;
  }
}

TEST_F(AgentProcessTest, StopExecutorEndsWithSuccess) {
  FakeDriver driver;
  auto agent = startAgent(agentCommand(driver.url()).argv());
  ASSERT_TRUE(driver.waitForRegistration(10s)) << agent->output();
  driver.send(proto::makeMessage(proto::StopExecutor{}));
  EXPECT_EQ(agent->waitExit(10s), 0) << agent->output();
}

TEST_F(AgentProcessTest, ExitsWithDriverLostCodeAndLeavesNoTaskBehind) {
  FakeDriver driver;
  auto agent = startAgent(agentCommand(driver.url()).argv());
  ASSERT_TRUE(driver.waitForRegistration(10s)) << agent->output();
  auto pid_file = dir.path() / "pids";
  driver.send(launch(1, {{"shell", "echo $$ >> " + pid_file.string() + "; exec sleep 300"}}));
  auto pids = readPids(pid_file, 1);
  ASSERT_EQ(pids.size(), 1u) << agent->output();
  driver.dropConnection();
  EXPECT_EQ(agent->waitExit(15s), toInt(ExitCode::kDriverLost)) << agent->output();
  EXPECT_TRUE(waitUntil([&] { return processGone(pids[0]); }, 5s));
}

TEST_F(AgentProcessTest, ExitsWithBootstrapCodeAfterThreeFailedTries) {
  auto config = dir.path() / "agent.json";
  writeFile(config, R"({"connect_retry_delay_ms": 50})");
  auto command = agentCommand("ws://127.0.0.1:" + std::to_string(unusedPort()) + "/");
  command.config = config;
  auto agent = startAgent(command.argv());
  EXPECT_EQ(agent->waitExit(30s), toInt(ExitCode::kBootstrapFailed)) << agent->output();
  EXPECT_NE(agent->output().find("after 3 tries"), std::string::npos) << agent->output();
}

TEST_F(AgentProcessTest, ExitsWhenItsWorkerGoesAway) {
  FakeDriver driver;
  Poco::Net::ServerSocket worker(Poco::Net::SocketAddress("127.0.0.1", 0));
  auto command = agentCommand(driver.url());
  command.extra = {"--worker-url", "tcp://127.0.0.1:" + std::to_string(worker.address().port())};
  auto agent = startAgent(command.argv());
  ASSERT_TRUE(driver.waitForRegistration(10s)) << agent->output();
  ASSERT_TRUE(worker.poll(Poco::Timespan(10, 0), Poco::Net::Socket::SELECT_READ))
      << agent->output();
  Poco::Net::StreamSocket connection = worker.acceptConnection();
  EXPECT_TRUE(agent->running());
  connection.close();  // the worker goes away
  worker.close();
  EXPECT_EQ(agent->waitExit(15s), toInt(ExitCode::kWorkerLost)) << agent->output();
  EXPECT_TRUE(driver.waitForType("RemoveExecutor", 5s).has_value());
}

TEST_F(AgentProcessTest, AnswersMalformedFramesAndKeepsRunning) {
  FakeDriver driver;
  auto agent = startAgent(agentCommand(driver.url()).argv());
  ASSERT_TRUE(driver.waitForRegistration(10s)) << agent->output();
  driver.sendRaw("{this is not json");
  auto error = driver.waitForType("Error", 5s);
  ASSERT_TRUE(error.has_value()) << agent->output();
  EXPECT_EQ(error->error->code, "malformed_frame");
  driver.sendRaw(R"({"type": "NoSuchMessage", "id": 42, "body": {}})");
  auto reply =
      driver.waitFor([](const proto::Envelope& e) { return e.isReply() && e.re == 42; }, 5s);
  ASSERT_TRUE(reply.has_value());
  EXPECT_EQ(reply->error->code, "unknown_type");
  driver.sendRaw(R"({"type": "LaunchTask", "body": {"task": {"name": "no id"}}})");
  auto invalid = driver.waitForType("Error", 5s);
  ASSERT_TRUE(invalid.has_value());
  EXPECT_EQ(invalid->error->code, "invalid_body");
  EXPECT_NE(invalid->error->message.find("/task/task_id"), std::string::npos);
  // Still serving: a real task runs.
  driver.send(launch(5, {{"command", {"/bin/echo", "alive"}}}));
  auto done = driver.waitForStatus(5, proto::TaskState::kFinished);
  ASSERT_TRUE(done) << agent->output();
  EXPECT_EQ(done->result["stdout"], "alive\n");
  EXPECT_TRUE(agent->running());
}

// One frame over the agent's limit must not cost the tasks running there: the agent drops
// its payload, answers frame_too_large and carries on (docs/protocol.md section 4). So does a
// frame that is not valid UTF-8 (a deliberate deviation from RFC 6455 section 8.1: answered
// malformed_frame, the connection kept).
TEST_F(AgentProcessTest, OversizedFrameIsDroppedAndRunningTasksGoOn) {
  FakeDriver driver;
  auto config = dir.path() / "agent.json";
  writeFile(config, R"({"max_frame_bytes": 1048576})");
  auto command = agentCommand(driver.url());
  command.config = config;
  auto agent = startAgent(command.argv());
  ASSERT_TRUE(driver.waitForRegistration(10s)) << agent->output();
  driver.send(launch(1, {{"shell", "exec sleep 300"}}));
  ASSERT_TRUE(driver.waitForStatus(1, proto::TaskState::kRunning)) << agent->output();

  std::string big = R"({"type": "KillTask", "body": {"task_id": 1, "reason": ")";
  big.append(std::size_t{2} << 20, 'x').append(R"("}})");
  ASSERT_TRUE(driver.sendRaw(big));
  auto error = driver.waitForType("Error", 10s);
  ASSERT_TRUE(error.has_value()) << agent->output();
  EXPECT_EQ(error->error->code, "frame_too_large");
  EXPECT_NE(error->error->message.find(std::to_string(big.size()) + " bytes"), std::string::npos)
      << error->error->message;

  ASSERT_TRUE(
      driver.sendRaw("{\"type\": \"KillTask\", \"body\": {\"task_id\": 1, \"reason\": \"\xff\"}}"));
  auto invalid = driver.waitForType("Error", 10s);
  ASSERT_TRUE(invalid.has_value()) << agent->output();
  EXPECT_EQ(invalid->error->code, "malformed_frame");

  // Neither reached the task, and the agent still serves.
  driver.send(launch(2, {{"command", {"/bin/echo", "alive"}}}));
  auto done = driver.waitForStatus(2, proto::TaskState::kFinished);
  ASSERT_TRUE(done) << agent->output();
  EXPECT_EQ(done->result["stdout"], "alive\n");
  for (const auto& frame : driver.history()) {
    if (frame.type != "StatusUpdate") continue;
    const auto update = proto::decodeBody<proto::StatusUpdate>(frame.body);
    EXPECT_FALSE(update.task_id == 1 && update.state != proto::TaskState::kRunning)
        << "task 1 ended: " << update.reason;
  }
  EXPECT_TRUE(agent->running()) << agent->output();
  EXPECT_TRUE(driver.connected());
  // Task 1 was running all along; now it ends as the driver asks.
  proto::KillTask kill;
  kill.task_id = 1;
  kill.interrupt = true;
  driver.send(proto::makeMessage(kill));
  EXPECT_TRUE(driver.waitForStatus(1, proto::TaskState::kKilled)) << agent->output();
}

// The man page (docs/man/dockhand.8.md) and --help must agree on which options are required,
// and every option --help lists has its entry in the man page.
TEST_F(AgentProcessTest, ManPageAndHelpAgreeOnEveryOption) {
  ChildProcess help({agentBinary(), "--help"}, (dir.path() / "help.log").string());
  ASSERT_EQ(help.waitExit(10s), 0) << help.output();
  // --help: "  --name=VALUE  description..." with the description wrapped on indented lines.
  std::map<std::string, std::string> in_help;
  std::string current;
  std::istringstream help_lines(help.output());
  for (std::string line; std::getline(help_lines, line);) {
    const auto start = line.find_first_not_of(' ');
    if (start != std::string::npos && line.compare(start, 2, "--") == 0) {
      current = line.substr(start + 2, line.find_first_of("= ", start) - start - 2);
      in_help[current] = line;
    } else if (!current.empty() && start != std::string::npos && start > 2) {
      in_help[current] += " " + line.substr(start);
    } else {
      current.clear();
    }
  }
  ASSERT_GE(in_help.count("cores"), 1u) << help.output();
  // The man page: "`--name VALUE`" and its description on the indented lines after it.
  std::map<std::string, std::string> in_man;
  std::ifstream man(std::string(DOCKHAND_SOURCE_DIR) + "/docs/man/dockhand.8.md");
  ASSERT_TRUE(man.good());
  current.clear();
  for (std::string line; std::getline(man, line);) {
    if (line.rfind("`--", 0) == 0) {
      current = line.substr(3, line.find_first_of(" `", 3) - 3);
      in_man[current] = "";
    } else if (!current.empty() && line.rfind("    ", 0) == 0) {
      in_man[current] += line;
    } else {
      current.clear();
    }
  }
  for (const auto& [name, text] : in_help) {
    if (name == "help" || name == "version") continue;
    ASSERT_EQ(in_man.count(name), 1u) << "--" << name << " is not in the man page";
    const bool help_required = text.find("(required)") != std::string::npos;
    const bool man_required = in_man[name].find("required") != std::string::npos;
    EXPECT_EQ(man_required, help_required)
        << "--" << name << "\n  --help: " << text << "\n  man: " << in_man[name];
  }
}

TEST_F(AgentProcessTest, LaunchBeforeRegistrationIsAProtocolViolation) {
  FakeDriver::Options options;
  options.refuse_registration = true;
  FakeDriver driver(options);
  auto agent = startAgent(agentCommand(driver.url()).argv());
  EXPECT_EQ(agent->waitExit(10s), toInt(ExitCode::kRegistrationRefused)) << agent->output();
  EXPECT_NE(agent->output().find("refused"), std::string::npos);
}

TEST_F(AgentProcessTest, SigtermStopsTasksAndExitsCleanly) {
  FakeDriver driver;
  auto agent = startAgent(agentCommand(driver.url()).argv());
  ASSERT_TRUE(driver.waitForRegistration(10s)) << agent->output();
  auto pid_file = dir.path() / "pids";
  driver.send(launch(1, {{"shell", "echo $$ >> " + pid_file.string() + "; exec sleep 300"}}));
  auto pids = readPids(pid_file, 1);
  ASSERT_EQ(pids.size(), 1u);
  agent->signal(SIGTERM);
  EXPECT_EQ(agent->waitExit(15s), 0) << agent->output();
  EXPECT_TRUE(driver.waitForStatus(1, proto::TaskState::kKilled, 5s).has_value());
  EXPECT_TRUE(driver.waitForType("RemoveExecutor", 5s).has_value());
  EXPECT_TRUE(processGone(pids[0]));
}

// ---- The command line ----

TEST_F(AgentProcessTest, HelpListsOptionsAndExitCodes) {
  auto agent = startAgent({agentBinary(), "--help"});
  EXPECT_EQ(agent->waitExit(10s), 0);
  std::string out = agent->output();
  for (const char* option : {"--driver-url", "--executor-id", "--bind-address", "--hostname",
                             "--cores", "--resourcesFile", "--app-id", "--worker-url",
                             "--resourceProfileId", "--config", "driver-lost"}) {
    EXPECT_NE(out.find(option), std::string::npos) << option;
  }
}

// Without TLS the agent never loads the TLS module, so neither OpenSSL nor Poco's NetSSL (with
// the Poco Util, XML and JSON libraries it needs) take memory in it: the idle agent's RSS.
TEST_F(AgentProcessTest, AnAgentWithoutTlsMapsNoOpenSsl) {
  FakeDriver driver;
  auto agent = startAgent(agentCommand(driver.url()).argv());
  ASSERT_TRUE(driver.waitForRegistration(10s)) << agent->output();
  const std::string maps = readFile("/proc/" + std::to_string(agent->pid()) + "/maps");
  for (const char* library : {"/libdockhand-tls.so", "/libssl.so", "/libcrypto.so",
                              "/libPocoNetSSL.so", "/libPocoCrypto.so", "/libPocoUtil.so"}) {
    EXPECT_EQ(maps.find(library), std::string::npos) << library << " is mapped:\n" << maps;
  }
  EXPECT_NE(maps.find("/libPocoNet.so"), std::string::npos) << maps;
}

TEST_F(AgentProcessTest, VersionPrintsTheVersion) {
  auto agent = startAgent({agentBinary(), "--version"});
  EXPECT_EQ(agent->waitExit(10s), 0);
  EXPECT_NE(agent->output().find("dockhand 0."), std::string::npos) << agent->output();
}

TEST_F(AgentProcessTest, UnknownOptionPrintsUsage) {
  auto agent = startAgent({agentBinary(), "--no-such-option", "x"});
  EXPECT_EQ(agent->waitExit(10s), toInt(ExitCode::kUsage));
  EXPECT_NE(agent->output().find("usage"), std::string::npos) << agent->output();
}

TEST_F(AgentProcessTest, MissingRequiredOptionsAreNamed) {
  auto agent = startAgent({agentBinary(), "--driver-url", "ws://127.0.0.1:1/"});
  EXPECT_EQ(agent->waitExit(10s), toInt(ExitCode::kUsage));
  std::string out = agent->output();
  EXPECT_NE(out.find("--executor-id"), std::string::npos) << out;
  EXPECT_NE(out.find("--app-id"), std::string::npos) << out;
  EXPECT_NE(out.find("--cores"), std::string::npos) << out;
}

TEST_F(AgentProcessTest, ConfigErrorNamesFileAndPathBeforeConnecting) {
  FakeDriver driver;
  auto config = dir.path() / "bad.json";
  writeFile(config, R"({"plugins": [{"name": "process", "required": "yes"}]})");
  auto command = agentCommand(driver.url());
  command.config = config;
  auto agent = startAgent(command.argv());
  EXPECT_EQ(agent->waitExit(10s), toInt(ExitCode::kConfigError));
  std::string out = agent->output();
  EXPECT_NE(out.find(config.string()), std::string::npos) << out;
  EXPECT_NE(out.find("/plugins/0/required"), std::string::npos) << out;
  EXPECT_FALSE(driver.connected());
}

TEST_F(AgentProcessTest, CommandLineOverridesTheConfigFile) {
  FakeDriver driver;
  auto config = dir.path() / "agent.json";
  writeFile(config, R"({"driver_url": "ws://127.0.0.1:1/", "executor_id": "from-file",
                        "app_id": "a", "cores": 1})");
  auto agent = startAgent({agentBinary(), "--config", config.string(), "--driver-url", driver.url(),
                           "--executor-id", "from-cli", "--work-dir", (dir.path() / "w").string()});
  ASSERT_TRUE(driver.waitForRegistration(10s)) << agent->output();
  auto launched = driver.waitForType("Heartbeat", 5s);
  ASSERT_TRUE(launched.has_value());
  EXPECT_EQ(proto::decodeBody<proto::Heartbeat>(launched->body).executor_id, "from-cli");
}

}  // namespace
}  // namespace dockhand::testing
