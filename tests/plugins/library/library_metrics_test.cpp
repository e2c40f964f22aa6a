// What the library runner says a task cost (its terminal detail's "metrics"): the CPU time of
// the thread that ran the task function, on a thread of the agent and in a worker process.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "library_test_support.h"
#include "plugins/plugin_host.h"
#include "status_recorder.h"
#include "test_processes.h"

namespace dockhand::agent {
namespace {

using dockhand::testing::installJobLibrary;
using dockhand::testing::libraryTask;
using dockhand::testing::StatusRecorder;
using dockhand::testing::TempDir;
using nlohmann::json;

class LibraryMetricsTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    std::filesystem::create_directories(libs_.path() / "lib");
    json config = GetParam() == "workers" ? json{{"worker_processes", 1}} : json::object();
    config["libraries"]["test"] =
        installJobLibrary(libs_.path() / "lib", DOCKHAND_TEST_JOBS, "libtest-jobs.so");
    runner_ = host_.createTaskRunner("library", config.dump(), recorder_.callback());
  }
  void TearDown() override { runner_.reset(); }

  dockhand::testing::Report run(std::uint64_t id, const std::string& function, json args) {
    const json payload = {{"library", "test"}, {"function", function}, {"args", std::move(args)}};
    auto launched = runner_->launch(libraryTask(tasks_.path(), id, payload));
    EXPECT_TRUE(launched.ok()) << launched.error;
    auto end = recorder_.waitTerminal(id, std::chrono::seconds(60));
    EXPECT_TRUE(end) << "task " << id << " never ended";
    return end.value_or(dockhand::testing::Report{});
  }

  TempDir libs_;
  TempDir tasks_;
  StatusRecorder recorder_;
  PluginHost host_{{DOCKHAND_PLUGIN_DIR}};
  std::unique_ptr<TaskRunnerPlugin> runner_;
};

TEST_P(LibraryMetricsTest, CpuTimeIsTheTaskThreadsWithinTenPercent) {
  const auto end = run(1, "burnCpu", {{"ms", 500}});
  ASSERT_EQ(end.state, DH_TASK_FINISHED) << end.detail;
  const auto cpu = end.detail.at("metrics").at("cpu_time_ms").get<long>();
  EXPECT_GE(cpu, 450) << end.detail;
  EXPECT_LE(cpu, 550) << end.detail;
  EXPECT_EQ(end.detail.at("metrics").at("result_bytes"), 0);
  // A library task shares its process's memory: no figure of its own.
  EXPECT_FALSE(end.detail.at("metrics").contains("peak_rss_bytes"));
}

TEST_P(LibraryMetricsTest, AFailedTaskReportsItsCpuTimeToo) {
  const auto end = run(1, "failByThrowing", json::object());
  ASSERT_EQ(end.state, DH_TASK_FAILED) << end.detail;
  EXPECT_TRUE(end.detail.at("metrics").contains("cpu_time_ms")) << end.detail;
  EXPECT_FALSE(end.detail.at("metrics").contains("result_bytes")) << end.detail;
}

INSTANTIATE_TEST_SUITE_P(Modes, LibraryMetricsTest, ::testing::Values("threads", "workers"));

}  // namespace
}  // namespace dockhand::agent
