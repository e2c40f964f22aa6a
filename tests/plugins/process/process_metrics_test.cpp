// What the process runner says a task cost (its terminal detail's "metrics"): the kernel's
// figures for the task's whole process tree, measured on real processes.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "plugins/plugin_host.h"
#include "process_task_json.h"
#include "status_recorder.h"
#include "test_processes.h"

namespace dockhand::agent {
namespace {

using dockhand::testing::StatusRecorder;
using dockhand::testing::TempDir;
using nlohmann::json;

// A Python program that burns `seconds` of its own CPU time, then prints what it burned (its
// whole process CPU time, start-up included) in ms.
std::string burnCpu(double seconds) {
  return "python3 -c 'import time\nwhile time.process_time() < " + std::to_string(seconds) +
         ": pass\nprint(int(time.process_time() * 1000))'";
}

class ProcessMetricsTest : public ::testing::Test {
 protected:
  dockhand::testing::Report run(std::uint64_t id, const std::string& script) {
    auto launched = runner_->launch(processTaskJson(tmp_.path(), id, json{{"shell", script}}));
    EXPECT_TRUE(launched.ok()) << launched.error;
    auto end = recorder_.waitTerminal(id, std::chrono::seconds(60));
    EXPECT_TRUE(end) << "task " << id << " never ended";
    return end.value_or(dockhand::testing::Report{});
  }

  TempDir tmp_;
  StatusRecorder recorder_;
  PluginHost host_{{DOCKHAND_PLUGIN_DIR}};
  std::unique_ptr<TaskRunnerPlugin> runner_ =
      host_.createTaskRunner("process", "{}", recorder_.callback());
};

// CPU time of the children this process reaped so far, in ms (the runner reaps in this
// process: the difference over one task is its whole tree, as the kernel counted it).
long childrenCpuMs() {
  rusage usage{};
  ::getrusage(RUSAGE_CHILDREN, &usage);
  auto ms = [](const timeval& t) { return t.tv_sec * 1000L + t.tv_usec / 1000L; };
  return ms(usage.ru_utime) + ms(usage.ru_stime);
}

TEST_F(ProcessMetricsTest, CpuTimeIsTheWholeTreesWithinTenPercent) {
  // Two children burn half a second each, at the same time; the shell waits for both. What
  // they burned is what the kernel counted, whatever else the machine does meanwhile.
  const long before = childrenCpuMs();
  const auto end =
      run(1, "(" + burnCpu(0.5) + ") > a & (" + burnCpu(0.5) + ") > b & wait; cat a b");
  const long spent = childrenCpuMs() - before;
  ASSERT_EQ(end.state, DH_TASK_FINISHED) << end.detail;
  const std::string out = end.detail.at("result").at("stdout");
  long burned = 0;
  for (std::size_t at = 0; at < out.size();) {
    const std::size_t eol = out.find('\n', at);
    burned += std::stol(out.substr(at, eol - at));
    at = eol == std::string::npos ? out.size() : eol + 1;
  }
  ASSERT_GE(burned, 1000) << out;
  ASSERT_GE(spent, burned);
  const auto& metrics = end.detail.at("metrics");
  const auto cpu = metrics.at("cpu_time_ms").get<long>();
  EXPECT_GE(cpu, burned) << metrics;  // the children's own count, a lower bound
  EXPECT_GE(cpu, spent * 9 / 10) << metrics << ", the kernel counted " << spent << " ms";
  EXPECT_LE(cpu, spent * 11 / 10) << metrics << ", the kernel counted " << spent << " ms";
  EXPECT_EQ(metrics.at("result_bytes"), out.size());
}

// This process's peak resident memory, in bytes (what a spawned task's ru_maxrss starts at).
std::uint64_t ownPeakBytes() {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stoull(line.substr(6)) * 1024;
  }
  return 0;
}

TEST_F(ProcessMetricsTest, PeakMemoryIsAtLeastWhatTheTaskTouched) {
  // Written (not only reserved), held, then given back before the task ends: more than this
  // process holds (what the kernel starts a spawned child's peak at), so wait4 tells it.
  const std::uint64_t mib = std::max<std::uint64_t>(100, ownPeakBytes() / (1 << 20) + 50);
  const auto end = run(
      1, "python3 -c 'b = b\"x\" * (" + std::to_string(mib) + " << 20); del b; print(\"done\")'");
  ASSERT_EQ(end.state, DH_TASK_FINISHED) << end.detail;
  EXPECT_GE(end.detail.at("metrics").at("peak_rss_bytes").get<std::uint64_t>(), mib << 20)
      << end.detail;
}

TEST_F(ProcessMetricsTest, ALongTasksSmallPeakIsSampledNotTakenFromTheAgent) {
  // 20 MiB held for a second: below this process's own peak under a sanitizer, so wait4's
  // figure cannot be told from ours; the leader's samples tell it (and never ours).
  const auto end = run(1,
                       "exec python3 -c 'import time; b = b\"x\" * (20 << 20); "
                       "time.sleep(1); print(len(b))'");
  ASSERT_EQ(end.state, DH_TASK_FINISHED) << end.detail;
  const auto peak = end.detail.at("metrics").at("peak_rss_bytes").get<std::uint64_t>();
  EXPECT_GE(peak, 20u << 20) << end.detail;
  EXPECT_LT(peak, 200u << 20) << end.detail;
}

TEST_F(ProcessMetricsTest, FailedTasksReportTheirFiguresToo) {
  const auto end = run(1, "head -c 65536 /dev/zero > out; exit 3");
  ASSERT_EQ(end.state, DH_TASK_FAILED) << end.detail;
  const auto& metrics = end.detail.at("metrics");
  EXPECT_TRUE(metrics.contains("cpu_time_ms")) << metrics;
  // The shell's child wrote 64 KiB; its reaped children's I/O is the zombie leader's too.
  ASSERT_TRUE(metrics.contains("io_write_bytes")) << metrics;
  EXPECT_GE(metrics.at("io_write_bytes").get<std::uint64_t>(), 65536u) << metrics;
  EXPECT_FALSE(metrics.contains("result_bytes")) << metrics;
}

}  // namespace
}  // namespace dockhand::agent
