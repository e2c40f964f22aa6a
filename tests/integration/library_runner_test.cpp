// End to end: a job of `library` runner tasks under the real driver and a real agent, the
// second stage reading the block the first one wrote (a job library of tests/fixtures/jobs).
#include <sys/stat.h>

#include <filesystem>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "support/agent_command.h"
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

  TempDir dir;
  fs::path port_file_ = dir.path() / "port";
};

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
  ChildProcess driver(argv, (dir.path() / "driver.log").string());
  ASSERT_TRUE(waitUntil([&] { return fs::exists(port_file_); }, 10s)) << driver.output();
  const int port = std::stoi(readFile(port_file_));
  const AgentCommand command{.config = agent_config,
                             .driver_url = "ws://127.0.0.1:" + std::to_string(port) + "/",
                             .executor_id = "agent-1",
                             .app_id = "library-runner-test",
                             .work_dir = dir.path() / "work"};
  ChildProcess agent(command.argv(), (dir.path() / "agent.log").string());

  auto exit_code = driver.waitExit(120s);
  ASSERT_TRUE(exit_code.has_value()) << driver.output() << agent.output();
  EXPECT_EQ(*exit_code, 0) << driver.output() << agent.output();
  EXPECT_NE(driver.output().find("job library-job SUCCEEDED"), std::string::npos)
      << driver.output() << agent.output();
  EXPECT_EQ(readFile(consumed), "hello blocks") << agent.output();
}

}  // namespace
}  // namespace dockhand::testing
