// What the library runner says a task cost (its terminal detail's "metrics"): the CPU time of
// the thread that ran the task function, on a thread of the agent and in a worker process; and
// the memory a running task holds, in what the agent's heartbeats report (its own resident
// memory, or that of the processes it started: app/usage_sampler.cpp reads the same figures).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "dockhand/metrics/process_stats.h"
#include "library_test_support.h"
#include "plugins/plugin_host.h"
#include "status_recorder.h"
#include "test_processes.h"

namespace dockhand::agent {
namespace {

using dockhand::testing::installJobLibrary;
using dockhand::testing::libraryTask;
using dockhand::testing::StatusRecorder;
using dockhand::testing::taskDir;
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

TEST_P(LibraryMetricsTest, MemoryARunningTaskHoldsShowsInTheAgentsFigures) {
  constexpr std::uint64_t kHeld = 100ULL << 20U;
  const bool workers = GetParam() == "workers";
  // Threads: the task's memory is this process's; workers: a child's.
  const auto figure = [workers]() -> std::uint64_t {
    if (workers) return metrics::descendantsRssBytes(0);
    const auto self = metrics::readProcessStats();
    return self ? self->rss_bytes : 0;
  };
  if (workers) run(1, "processId", json::object());  // the worker is up before the baseline
  const std::uint64_t before = figure();
  const json payload = {{"library", "test"}, {"function", "holdMemory"}, {"args", {{"mib", 100}}}};
  ASSERT_TRUE(runner_->launch(libraryTask(tasks_.path(), 2, payload)).ok());
  ASSERT_TRUE(dockhand::testing::eventually(
      [&] { return std::filesystem::exists(taskDir(tasks_.path(), 2) / "output" / "ready"); },
      std::chrono::seconds(30)))
      << "the task never held its memory";
  const std::uint64_t holding = figure();
  EXPECT_GE(holding, before + kHeld) << "before " << before << ", while holding " << holding;
  ASSERT_TRUE(runner_->kill(2, false, "test over").ok());
  EXPECT_TRUE(recorder_.waitTerminal(2, std::chrono::seconds(30)));
}

INSTANTIATE_TEST_SUITE_P(Modes, LibraryMetricsTest, ::testing::Values("threads", "workers"));

}  // namespace
}  // namespace dockhand::agent
