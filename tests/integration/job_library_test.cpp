// End to end: the example job library (examples/jobs, "words") under the real driver on two
// real local agents with the `library` runner: the word count, the two-stage shuffle (maps
// write shuffle blocks, reduces read them), and a result too large for a status update, which
// the agent stores as a block and the driver fetches (signed in a cluster with a secret, over
// TLS in one with TLS). Skipped where the library runner plugin is not built.
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "support/process.h"
#include "support/test_pki.h"

namespace dockhand::testing {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;
using std::chrono_literals::operator""s;

const fs::path kExamples = fs::path(DOCKHAND_SOURCE_DIR) / "examples";

// Words in the example's input, counted the way `wc -w` does.
long countWords(const fs::path& file) {
  std::ifstream in(file);
  long words = 0;
  std::string word;
  while (in >> word) ++words;
  return words;
}

long allWords() {
  long words = 0;
  for (int i = 1; i <= 4; ++i) {
    words += countWords(kExamples / "wordcount" / "data" / ("part-" + std::to_string(i) + ".txt"));
  }
  return words;
}

class JobLibraryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(DOCKHAND_LIBRARY_RUNNER)) {
      GTEST_SKIP() << "the library runner plugin is not built (" << DOCKHAND_LIBRARY_RUNNER << ")";
    }
  }

  // The agents' config: the library runner with the example library as "words".
  fs::path writeAgentConfig(const Json& runner_settings = Json::object()) {
    Json runner = {{"libraries", {{"words", DOCKHAND_EXAMPLE_JOB_LIBRARY}}}};
    runner.update(runner_settings);
    Json config = {{"block_port", 0},
                   {"plugins", {{{"name", "process"}}, {{"name", "library"}, {"config", runner}}}}};
    fs::path path = dir.path() / "agent.json";
    writeFile(path, config.dump(2));
    return path;
  }

  // `dockhand-driver run JOB` on two local agents; returns its exit code and fills out_.
  int run(const fs::path& job, const fs::path& agent_config,
          const std::vector<std::string>& extra = {}) {
    std::vector<std::string> argv = {driverBinary(),   "run",       job.string(),
                                     "--local-agents", "2",         "--agent-config",
                                     agent_config,     "--timeout", "120"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    ChildProcess driver(argv, (dir.path() / "driver.log").string());
    const auto code = driver.waitExit(150s);
    out_ = driver.output();
    return code.value_or(-1);
  }

  TempDir dir;
  std::string out_;
};

// `dockhand jobs` with no driver and no agent: inspect the example library, run one map into a
// work dir, then the reduce over the map's two blocks; its value on stdout is the word count of
// the map's file. A task that fails exits 1 with its reason.
TEST_F(JobLibraryTest, DockhandJobsRunsOneTaskFunctionWithoutADriver) {
  auto jobs = [&](const std::string& args, const std::string& name) {
    const fs::path out = dir.path() / (name + ".out");
    ChildProcess child({"/bin/sh", "-c",
                        "exec '" + agentBinary() + "' jobs " + args + " > '" + out.string() + "'"},
                       (dir.path() / (name + ".err")).string());
    const int code = child.waitExit(60s).value_or(-1);
    std::ifstream in(out, std::ios::binary);
    return std::tuple{code, std::string(std::istreambuf_iterator<char>(in), {}), child.output()};
  };
  const std::string library = DOCKHAND_EXAMPLE_JOB_LIBRARY;
  auto [code, out, err] = jobs("inspect --json '" + library + "'", "inspect");
  ASSERT_EQ(code, 0) << err;
  const Json described = Json::parse(out);
  EXPECT_EQ(described["name"], "words");
  EXPECT_EQ(described["functions"], Json::array({"count", "map", "reduce"}));

  const fs::path part = kExamples / "wordcount" / "data" / "part-1.txt";
  const fs::path work = dir.path() / "map-work";
  const Json map_args = {{"file", part.string()}, {"shuffle", 0}, {"map", 0}, {"reducers", 2}};
  std::tie(code, out, err) = jobs("run '" + library + "' map --work-dir '" + work.string() +
                                      "' --args '" + map_args.dump() + "'",
                                  "map");
  ASSERT_EQ(code, 0) << err;
  EXPECT_NE(err.find("output shuffle_0_0_1: "), std::string::npos) << err;
  std::tie(code, out, err) =
      jobs("run '" + library + "' reduce --input shuffle_0_0_0='" +
               (work / "output" / "shuffle_0_0_0").string() + "' --input shuffle_0_0_1='" +
               (work / "output" / "shuffle_0_0_1").string() + "'",
           "reduce");
  ASSERT_EQ(code, 0) << err;
  EXPECT_EQ(out, std::to_string(countWords(part)));

  std::tie(code, out, err) = jobs("run '" + library + "' map --args '{\"reducers\": 0}'", "bad");
  EXPECT_EQ(code, 1) << err;
  EXPECT_NE(err.find("task map FAILED: "), std::string::npos) << err;
  EXPECT_NE(err.find("reducers must be 1..10000"), std::string::npos) << err;
}

TEST_F(JobLibraryTest, WordCountAddsUpTheTaskFunctionsResults) {
  ASSERT_EQ(run(kExamples / "jobs" / "wordcount.json", writeAgentConfig()), 0) << out_;
  EXPECT_NE(out_.find("job wordcount-library SUCCEEDED"), std::string::npos) << out_;
  EXPECT_NE(out_.find("sum=" + std::to_string(allWords())), std::string::npos) << out_;
  const auto parts = linesStartingWith(out_, "part-");
  ASSERT_EQ(parts.size(), 4u) << out_;
  const std::string part1 =
      std::to_string(countWords(kExamples / "wordcount" / "data" / "part-1.txt"));
  EXPECT_NE(parts[0].find("FINISHED"), std::string::npos) << parts[0];
  EXPECT_EQ(parts[0].substr(parts[0].size() - part1.size() - 2), "  " + part1) << parts[0];
}

TEST_F(JobLibraryTest, TwoStageShuffleReducesWhatTheMapsWrote) {
  ASSERT_EQ(run(kExamples / "jobs" / "shuffle.json", writeAgentConfig()), 0) << out_;
  EXPECT_NE(out_.find("job shuffle-library SUCCEEDED"), std::string::npos) << out_;
  EXPECT_NE(out_.find("sum=" + std::to_string(allWords())), std::string::npos) << out_;
  EXPECT_NE(out_.find("0 map tasks rerun for lost blocks"), std::string::npos) << out_;
  const auto maps = linesStartingWith(out_, "map-");
  ASSERT_EQ(maps.size(), 4u) << out_;
  for (const auto& line : maps) EXPECT_NE(line.find("attempts=1"), std::string::npos) << line;
  const auto reduces = linesStartingWith(out_, "reduce-");
  ASSERT_EQ(reduces.size(), 2u) << out_;
  for (const auto& line : reduces) EXPECT_NE(line.find("FINISHED"), std::string::npos) << line;
}

// The same two-stage job with the tasks in worker processes: the same blocks, the same sum.
TEST_F(JobLibraryTest, TwoStageShuffleRunsInWorkerProcessesToo) {
  ASSERT_EQ(run(kExamples / "jobs" / "shuffle.json", writeAgentConfig({{"worker_processes", 2}})),
            0)
      << out_;
  EXPECT_NE(out_.find("job shuffle-library SUCCEEDED"), std::string::npos) << out_;
  EXPECT_NE(out_.find("sum=" + std::to_string(allWords())), std::string::npos) << out_;
  EXPECT_NE(out_.find("0 map tasks rerun for lost blocks"), std::string::npos) << out_;
}

// part-1's count padded to 200 KB: above the runner's max_direct_result_bytes, so the agent
// stores it as a block and the driver fetches it; the sum still adds it up.
fs::path writeLargeResultJob(const fs::path& dir) {
  Json tasks = Json::array();
  for (int i = 1; i <= 4; ++i) {
    Json args = {
        {"file",
         (kExamples / "wordcount" / "data" / ("part-" + std::to_string(i) + ".txt")).string()}};
    if (i == 1) args["pad_to"] = 200000;
    tasks.push_back({{"name", "part-" + std::to_string(i)},
                     {"library", "words"},
                     {"function", "count"},
                     {"args", args}});
  }
  fs::path job = dir / "large.json";
  writeFile(job, Json{{"name", "large"}, {"aggregate", "sum"}, {"tasks", tasks}}.dump(2));
  return job;
}

TEST_F(JobLibraryTest, ALargeResultTravelsAsABlockTheDriverFetches) {
  const fs::path config = writeAgentConfig({{"max_direct_result_bytes", 1000}});
  ASSERT_EQ(run(writeLargeResultJob(dir.path()), config, {"--log-level", "debug"}), 0) << out_;
  EXPECT_NE(out_.find("job large SUCCEEDED"), std::string::npos) << out_;
  EXPECT_NE(out_.find("sum=" + std::to_string(allWords())), std::string::npos) << out_;
  EXPECT_NE(out_.find("fetching its result, block task_"), std::string::npos) << out_;
  // Once fetched, the block is removed from its agent (signed and over TLS as the GET was).
  EXPECT_NE(out_.find("_result removed from http"), std::string::npos) << out_;
  EXPECT_EQ(out_.find("the block stays on the agent"), std::string::npos) << out_;
  EXPECT_NE(out_.find("(200000 bytes)"), std::string::npos) << out_;
}

TEST_F(JobLibraryTest, ALargeResultIsFetchedWithASignedRequestWhenTheClusterHasASecret) {
  // `run` gives its local agents the same secret: their block servers then take only requests
  // signed with it, the driver's result fetch included.
  const fs::path secret = dir.path() / "secret";
  writeFile(secret, "s3cr3t-f0r-the-job-library-test-4c2a\n");
  ASSERT_EQ(::chmod(secret.c_str(), 0600), 0);
  const fs::path config = writeAgentConfig({{"max_direct_result_bytes", 1000}});
  ASSERT_EQ(run(writeLargeResultJob(dir.path()), config,
                {"--auth-secret-file", secret.string(), "--log-level", "debug"}),
            0)
      << out_;
  EXPECT_NE(out_.find("fetching its result, block task_"), std::string::npos) << out_;
  // Once fetched, the block is removed from its agent (signed and over TLS as the GET was).
  EXPECT_NE(out_.find("_result removed from http"), std::string::npos) << out_;
  EXPECT_EQ(out_.find("the block stays on the agent"), std::string::npos) << out_;
  EXPECT_NE(out_.find("sum=" + std::to_string(allWords())), std::string::npos) << out_;
}

TEST_F(JobLibraryTest, ALargeResultIsFetchedOverTlsWhenTheClusterUsesIt) {
  // `run` gives its local agents the driver's tls section: their block servers serve https://
  // only, and the driver fetches the result block from there, verifying the agent's certificate.
  if (!TestPki::available()) GTEST_SKIP() << "the openssl program is not installed";
  TestPki pki(dir.path() / "pki");
  const fs::path driver_config = dir.path() / "driver.json";
  writeFile(driver_config, "{\"tls\": " + pki.tlsJson("server") + "}\n");
  const fs::path config = writeAgentConfig({{"max_direct_result_bytes", 1000}});
  ASSERT_EQ(run(writeLargeResultJob(dir.path()), config,
                {"--config", driver_config.string(), "--log-level", "debug"}),
            0)
      << out_;
  EXPECT_NE(out_.find("fetching its result, block task_"), std::string::npos) << out_;
  // Once fetched, the block is removed from its agent (signed and over TLS as the GET was).
  EXPECT_NE(out_.find("_result removed from http"), std::string::npos) << out_;
  EXPECT_EQ(out_.find("the block stays on the agent"), std::string::npos) << out_;
  EXPECT_NE(out_.find("from https://127.0.0.1:"), std::string::npos) << out_;
  EXPECT_NE(out_.find("sum=" + std::to_string(allWords())), std::string::npos) << out_;
}

// The driver's default launch_ahead ("auto"): once a job's tasks prove short, each agent is sent
// tasks beyond its free cores, which wait there for one; with launch_ahead 0, none is.
TEST_F(JobLibraryTest, ShortTasksAreSentAheadOnceTheyProveShortUnlessTheDriverIsToldNot) {
  Json tasks = Json::array();
  for (int i = 0; i < 200; ++i) {
    // No file and no input: a count of nothing, as short as a task gets.
    tasks.push_back({{"name", "c" + std::to_string(i)},
                     {"library", "words"},
                     {"function", "count"},
                     {"args", Json::object()}});
  }
  const fs::path job = dir.path() / "short.json";
  writeFile(job, Json{{"name", "short"}, {"tasks", tasks}}.dump());
  const fs::path config = writeAgentConfig();
  // Launches sent ahead, as the driver's event log says (task_start's "ahead"), of `runs`.
  auto sent_ahead = [&](const std::string& runs) {
    const fs::path events = dir.path() / (runs + ".jsonl");
    const int code =
        run(job, config,
            {"--log-level", "debug", "--event-log", events.string(), "--launch-ahead", runs});
    EXPECT_EQ(code, 0) << out_;
    EXPECT_NE(out_.find("job short SUCCEEDED: 200 tasks, 200 finished"), std::string::npos) << out_;
    int ahead = 0;
    std::istringstream lines(readFile(events));
    for (std::string line; std::getline(lines, line);) {
      const Json event = Json::parse(line);
      if (event["event"] == "task_start" && event.at("ahead").get<bool>()) ++ahead;
    }
    return ahead;
  };
  EXPECT_GT(sent_ahead("auto"), 0);
  EXPECT_NE(out_.find("launch_ahead auto: the job's last 16 tasks ran "), std::string::npos)
      << out_;
  fs::remove(dir.path() / "driver.log");
  EXPECT_EQ(sent_ahead("0"), 0);
  EXPECT_EQ(out_.find("launch_ahead auto"), std::string::npos) << out_;
}

// Two agents of one core, one task sent ahead to each: the agent whose tasks end first has a
// free core and nothing is pending, so the task waiting behind the long one on the other agent
// is recalled (KILLED there before it started) and runs on it, no attempt counted.
TEST_F(JobLibraryTest, ATaskWaitingBehindALongOneIsRecalledForAFreeCore) {
  const fs::path part = kExamples / "wordcount" / "data" / "part-1.txt";
  Json tasks =
      Json::array({{{"name", "long"},
                    {"library", "words"},
                    {"function", "map"},
                    {"args", {{"file", part.string()}, {"reducers", 1}, {"sleep_ms", 3000}}}}});
  for (int i = 0; i < 3; ++i) {
    tasks.push_back({{"name", "short" + std::to_string(i)},
                     {"library", "words"},
                     {"function", "count"},
                     {"args", Json::object()}});
  }
  const fs::path job = dir.path() / "tail.json";
  writeFile(job, Json{{"name", "tail"}, {"tasks", tasks}}.dump());
  const fs::path events = dir.path() / "tail.jsonl";
  ASSERT_EQ(run(job, writeAgentConfig(),
                {"--cores", "1", "--launch-ahead", "1", "--log-level", "debug", "--event-log",
                 events.string()}),
            0)
      << out_;
  EXPECT_NE(out_.find("job tail SUCCEEDED: 4 tasks, 4 finished, 0 failed, 0 not run; 0 retries"),
            std::string::npos)
      << out_;
  EXPECT_NE(out_.find("recalled to run on a free core of agent"), std::string::npos) << out_;
  // The task recalled started twice, on both agents, and ended KILLED on the first.
  std::map<std::string, std::vector<std::string>> started_on;
  std::vector<std::string> killed;
  std::istringstream lines(readFile(events));
  for (std::string line; std::getline(lines, line);) {
    const Json event = Json::parse(line);
    if (event["event"] == "task_start") {
      started_on[event.at("task").get<std::string>()].push_back(event.at("agent"));
    }
    if (event["event"] == "task_end" && event["state"] == "KILLED") killed.push_back(event["task"]);
  }
  ASSERT_EQ(killed.size(), 1u) << readFile(events);
  ASSERT_EQ(started_on[killed[0]].size(), 2u) << readFile(events);
  EXPECT_NE(started_on[killed[0]][0], started_on[killed[0]][1]);
  EXPECT_EQ(started_on["long"].size(), 1u);
}

TEST_F(JobLibraryTest, AResultBlockAboveTheDriversMaximumFailsTheTask) {
  const fs::path config = writeAgentConfig({{"max_direct_result_bytes", 1000}});
  const fs::path driver_config = dir.path() / "driver.json";
  writeFile(driver_config, R"({"max_result_bytes": 100000})");
  EXPECT_EQ(run(writeLargeResultJob(dir.path()), config,
                {"--config", driver_config.string(), "--log-level", "warn"}),
            1)
      << out_;
  EXPECT_NE(out_.find("job large FAILED"), std::string::npos) << out_;
  EXPECT_NE(out_.find("the driver could not get its result"), std::string::npos) << out_;
  EXPECT_NE(out_.find("200000 bytes is more than the driver takes (max_result_bytes 100000)"),
            std::string::npos)
      << out_;
}

}  // namespace
}  // namespace dockhand::testing
