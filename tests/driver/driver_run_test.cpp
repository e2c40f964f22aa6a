// End-to-end tests of `dockhand-driver run` with real local agents (the `dockhand` program
// built next to it), plus its exit codes for bad input. Every run is bounded by --timeout
// and an outer deadline; each test owns its temp dir.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "dockhand/base/child_spawn.h"

namespace {

namespace fs = std::filesystem;

struct RunResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

std::string readFile(const fs::path& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

class DriverRunTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char templ[] = "/tmp/dockhand-run-test-XXXXXX";
    ASSERT_NE(::mkdtemp(templ), nullptr);
    dir_ = templ;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  static bool agentBuilt() { return ::access(DOCKHAND_BIN_DIR "/dockhand", X_OK) == 0; }

  RunResult run(std::vector<std::string> args,
                std::chrono::seconds limit = std::chrono::seconds(60)) {
    const std::string bin = std::string(DOCKHAND_BIN_DIR) + "/dockhand-driver";
    args.insert(args.begin(), bin);
    const std::string out = (dir_ / "stdout").string();
    const std::string err = (dir_ / "stderr").string();
    dockhand::ChildSpawn child;
    child.open(1, out, dockhand::ChildSpawn::kTruncate)
        .open(2, err, dockhand::ChildSpawn::kTruncate);
    RunResult result;
    const dockhand::Result<pid_t> started = child.start(args);
    if (!started) {
      ADD_FAILURE() << started.error().message;
      return result;
    }
    const pid_t pid = *started;
    const auto deadline = std::chrono::steady_clock::now() + limit;
    int status = 0;
    while (::waitpid(pid, &status, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > deadline) {
        ::kill(pid, SIGKILL);  // ours; its agents notice the closed connection and exit
        ::waitpid(pid, &status, 0);
        ADD_FAILURE() << "dockhand-driver did not finish within " << limit.count() << " s";
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
    result.out = readFile(out);
    result.err = readFile(err);
    return result;
  }

  fs::path writeJob(const std::string& name, const std::string& json) {
    fs::path path = dir_ / name;
    std::ofstream(path) << json;
    return path;
  }

  // A job "ahead" of `count` tasks running `shell`, none retried (max_attempts 1).
  static std::string jobOf(int count, const std::string& shell) {
    nlohmann::json tasks = nlohmann::json::array();
    for (int i = 0; i < count; ++i) {
      std::string name = "t";
      name += std::to_string(i);
      tasks.push_back({{"name", name}, {"shell", shell}});
    }
    return nlohmann::json{{"name", "ahead"}, {"max_attempts", 1}, {"tasks", tasks}}.dump();
  }

  fs::path dir_;
};

std::size_t countWords(const fs::path& dir) {
  std::size_t words = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    std::ifstream in(entry.path());
    std::string word;
    while (in >> word) ++words;
  }
  return words;
}

TEST_F(DriverRunTest, WordcountExampleSumsTheWordsOfAllFiles) {
  if (!agentBuilt()) GTEST_SKIP() << "the dockhand agent is not built";
  const fs::path example = fs::path(DOCKHAND_SOURCE_DIR) / "examples/wordcount";
  RunResult r = run({"run", (example / "job.json").string(), "--timeout", "60"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("sum=" + std::to_string(countWords(example / "data"))), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("part-4  FINISHED"), std::string::npos) << r.out;
}

TEST_F(DriverRunTest, FailingTaskIsRetriedThenFailsTheJob) {
  if (!agentBuilt()) GTEST_SKIP() << "the dockhand agent is not built";
  fs::path job = writeJob("fail.json", R"({"name": "failing", "max_attempts": 2, "tasks": [
      {"name": "bad", "shell": "echo broken >&2; exit 3"},
      {"name": "good", "command": ["/bin/echo", "fine"]}]})");
  RunResult r = run({"run", job.string(), "--local-agents", "1", "--timeout", "60"});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("bad   FAILED"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("attempts=2"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("job failing FAILED"), std::string::npos) << r.out;
}

TEST_F(DriverRunTest, ResultsDirHoldsEachTasksWholeValue) {
  if (!agentBuilt()) GTEST_SKIP() << "the dockhand agent is not built";
  fs::path job = writeJob("long.json", R"({"name": "long", "tasks": [
      {"name": "wide", "shell": "i=0; while [ $i -lt 300 ]; do printf 'word%d ' $i; i=$((i+1)); done"},
      {"name": "a/b", "command": ["/bin/echo", "slash"]},
      {"name": "a_b", "command": ["/bin/echo", "underscore"]}]})");
  const fs::path results = dir_ / "results" / "deeper";
  RunResult r = run({"run", job.string(), "--local-agents", "1", "--timeout", "60", "--results-dir",
                     results.string()});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  std::string expected;
  for (int i = 0; i < 300; ++i) expected += "word" + std::to_string(i) + " ";
  EXPECT_EQ(readFile(results / "wide"), expected);
  EXPECT_NE(r.out.find("..."), std::string::npos) << "the report cuts the value: " << r.out;
  EXPECT_EQ(readFile(results / "a_b"), "slash\n");
  EXPECT_EQ(readFile(results / "a_b~2"), "underscore\n");
  const auto index = nlohmann::json::parse(readFile(results / "results.json"));
  ASSERT_EQ(index.size(), 3U) << index.dump();
  EXPECT_EQ(index[0]["name"], "wide");
  EXPECT_EQ(index[0]["outcome"], "FINISHED");
  EXPECT_EQ(index[0]["bytes"], expected.size());
  EXPECT_EQ(index[1]["file"], "a_b");
  EXPECT_EQ(index[2]["file"], "a_b~2");
}

TEST_F(DriverRunTest, ResultsDirThatCannotBeWrittenFailsTheRunNamingIt) {
  if (!agentBuilt()) GTEST_SKIP() << "the dockhand agent is not built";
  fs::path job = writeJob("ok.json", R"({"tasks": [{"name": "one", "command": ["/bin/true"]}]})");
  fs::path blocker = writeJob("a-file", "not a directory");
  RunResult r = run({"run", job.string(), "--local-agents", "1", "--timeout", "60", "--results-dir",
                     (blocker / "sub").string()});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.err.find("--results-dir: cannot create " + (blocker / "sub").string()),
            std::string::npos)
      << r.err;
}

TEST_F(DriverRunTest, AKilledTasksLineShowsHowItEnded) {
  if (!agentBuilt()) GTEST_SKIP() << "the dockhand agent is not built";
  const std::string started = (dir_ / "slow-started").string();
  fs::path job =
      writeJob("kill.json", R"({"name": "killing", "max_attempts": 1, "tasks": [
      {"name": "slow", "shell": "touch )" +
                                started + R"(; exec sleep 60"},
      {"name": "bad", "shell": "while [ ! -e )" +
                                started + R"( ]; do sleep 0.05; done; sleep 0.3; exit 3"}]})");
  RunResult r = run({"run", job.string(), "--local-agents", "1", "--timeout", "60"});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  std::smatch line;
  ASSERT_TRUE(std::regex_search(
      r.out, line, std::regex("slow +KILLED +agent-[0-9]+ +attempts=1 +([0-9]+)ms +(.*)")))
      << r.out;
  EXPECT_GT(std::stol(line[1].str()), 0) << line[0];
  EXPECT_NE(line[2].str().find("job failed"), std::string::npos) << line[0];
}

TEST_F(DriverRunTest, RetriedTaskSucceeds) {
  if (!agentBuilt()) GTEST_SKIP() << "the dockhand agent is not built";
  const std::string marker = (dir_ / "marker").string();
  fs::path job = writeJob("flaky.json", R"({"tasks": [{"name": "flaky", "shell":
      "if [ -e )" + marker + R"( ]; then echo ok; else touch )" +
                                            marker + R"(; exit 1; fi"}]})");
  RunResult r = run({"run", job.string(), "--local-agents", "1", "--timeout", "60"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("attempts=2"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("1 retries"), std::string::npos) << r.out;
}

TEST_F(DriverRunTest, LaunchAheadKeepsTheAgentWithinItsCores) {
  if (!agentBuilt()) GTEST_SKIP() << "the dockhand agent is not built";
  // One core, three more sent ahead: the agent holds them until the core is free. Each task
  // takes the one slot (mkdir fails when another task holds it) and gives it back, so a task
  // that started beside another fails, and with max_attempts 1 so does the job.
  const std::string slot = (dir_ / "slot").string();
  std::string hold = "mkdir ";
  hold.append(slot).append(" || exit 9; sleep 0.05; rmdir ").append(slot);
  fs::path job = writeJob("ahead.json", jobOf(8, hold));
  RunResult r = run({"run", job.string(), "--local-agents", "1", "--cores", "1", "--launch-ahead",
                     "3", "--timeout", "60"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("8 finished"), std::string::npos) << r.out;
}

TEST_F(DriverRunTest, TasksWaitingOnADecommissionedAgentRunElsewhere) {
  if (!agentBuilt()) GTEST_SKIP() << "the dockhand agent is not built";
  // Each agent holds 1 running task and 2 sent ahead. agent-1 decommissions while it holds
  // some: the waiting ones come back LOST and run on agent-2, the running one finishes, and
  // agent-1 leaves. The job loses nothing and counts no failure (max_attempts 1).
  fs::path job = writeJob("ahead.json", jobOf(10, "sleep 0.3"));
  fs::path agent_config = writeJob("agent.json", R"({"decommission": {"enabled": true}})");
  RunResult r = run({"run", job.string(), "--local-agents", "2", "--cores", "1", "--launch-ahead",
                     "2", "--agent-config", agent_config.string(), "--decommission", "agent-1",
                     "--decommission-after-ms", "150", "--log-level", "info", "--timeout", "60"});
  const std::string all = r.out + r.err;
  ASSERT_EQ(r.exit_code, 0) << all;
  EXPECT_NE(all.find("10 finished, 0 failed"), std::string::npos) << all;
  EXPECT_NE(all.find("agent 'agent-1' finished decommissioning and left"), std::string::npos)
      << all;
  std::smatch relaunched;
  ASSERT_TRUE(std::regex_search(all, relaunched, std::regex(R"(([0-9]+) relaunched)"))) << all;
  EXPECT_GE(std::stoi(relaunched[1].str()), 1) << "no waiting task came back from agent-1\n" << all;
}

TEST_F(DriverRunTest, TheEventLogReplaysTheReportAndCountsShuffleBytes) {
  if (!agentBuilt()) GTEST_SKIP() << "the dockhand agent is not built";
  // Two maps write one block each (3000 and 5000 bytes), the reduce reads both.
  fs::path job = writeJob("shuffle.json", R"({"name": "bytes", "tasks": [
      {"name": "map-0", "shell": "head -c 3000 /dev/zero > $DOCKHAND_OUTPUT_DIR/shuffle_0_0_0",
       "outputs": ["shuffle_0_0_0"]},
      {"name": "map-1", "shell": "head -c 5000 /dev/zero > $DOCKHAND_OUTPUT_DIR/shuffle_0_1_0",
       "outputs": ["shuffle_0_1_0"]},
      {"name": "reduce", "shell": "cat $DOCKHAND_INPUT_DIR/* | wc -c",
       "inputs": ["shuffle_0_0_0", "shuffle_0_1_0"]}]})");
  const fs::path log = dir_ / "events.jsonl";
  RunResult r = run(
      {"run", job.string(), "--local-agents", "2", "--timeout", "60", "--event-log", log.string()});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("cost: cpu "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("inputs 2 block(s), 7.8 KiB"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("outputs 2 block(s), 7.8 KiB"), std::string::npos) << r.out;

  RunResult replay = run({"report", log.string()});
  ASSERT_EQ(replay.exit_code, 0) << replay.err;
  EXPECT_EQ(replay.out, r.out);

  std::map<std::string, nlohmann::json> ended;
  std::uint64_t blocks_bytes = 0;
  std::ifstream in(log);
  for (std::string line; std::getline(in, line);) {
    const auto event = nlohmann::json::parse(line);
    if (event["event"] == "task_end") ended[event["task"]] = event["metrics"];
    if (event["event"] == "blocks") {
      for (const auto& block : event["added"]) blocks_bytes += block["size"].get<std::uint64_t>();
    }
  }
  ASSERT_EQ(ended.size(), 3u);
  EXPECT_EQ(blocks_bytes, 8000u);
  EXPECT_EQ(ended["map-0"]["output_bytes"], 3000);
  EXPECT_EQ(ended["map-1"]["output_bytes"], 5000);
  EXPECT_EQ(ended["reduce"]["input_blocks"], 2);
  EXPECT_EQ(ended["reduce"]["input_bytes"], 8000);
  EXPECT_FALSE(ended["reduce"].contains("output_bytes"));
  for (const auto& [name, metrics] : ended) {
    EXPECT_TRUE(metrics.contains("cpu_time_ms")) << name << ": " << metrics;
    EXPECT_TRUE(metrics.contains("run_time_ms")) << name << ": " << metrics;
  }
}

TEST_F(DriverRunTest, InvalidJobFileExits2NamingFileAndPath) {
  fs::path job = writeJob("bad.json", R"({"tasks": [{"shell": "true", "cpu": 2}]})");
  RunResult r = run({"run", job.string()});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("bad.json: /tasks/0/cpu: unknown key"), std::string::npos) << r.err;
}

TEST_F(DriverRunTest, InvalidConfigExits2) {
  fs::path job = writeJob("ok.json", R"({"tasks": [{"shell": "true"}]})");
  fs::path config = writeJob("driver.json", R"({"agent_timeout": 5})");
  RunResult r = run({"run", job.string(), "--config", config.string()});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("driver.json: /agent_timeout: unknown key"), std::string::npos) << r.err;
}

TEST_F(DriverRunTest, MissingAgentProgramExits2) {
  fs::path job = writeJob("ok.json", R"({"tasks": [{"shell": "true"}]})");
  RunResult r = run({"run", job.string(), "--agent-bin", (dir_ / "no-such-agent").string()});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("no-such-agent"), std::string::npos) << r.err;
}

TEST_F(DriverRunTest, UnknownOptionExits64WithUsage) {
  RunResult r = run({"run", "job.json", "--frobnicate"});
  EXPECT_EQ(r.exit_code, 64);
  EXPECT_NE(r.err.find("unknown option '--frobnicate'"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("usage: dockhand-driver"), std::string::npos) << r.err;
}

TEST_F(DriverRunTest, HelpAndVersion) {
  RunResult help = run({"--help"});
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.out.find("usage: dockhand-driver"), std::string::npos);
  RunResult version = run({"--version"});
  EXPECT_EQ(version.exit_code, 0);
  EXPECT_EQ(version.out.rfind("dockhand-driver ", 0), 0u) << version.out;
}

}  // namespace
