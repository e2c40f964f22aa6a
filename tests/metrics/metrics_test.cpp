#include "dockhand/metrics/metrics.h"

#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "dockhand/metrics/process_stats.h"

namespace dockhand::metrics {
namespace {

using ::testing::HasSubstr;

TEST(MetricsTest, CounterWithoutLabelsIsExposedAtZeroBeforeAnyCount) {
  Registry registry;
  registry.counter("dockhand_things_total", "Things done.");
  EXPECT_EQ(registry.expose(),
            "# HELP dockhand_things_total Things done.\n"
            "# TYPE dockhand_things_total counter\n"
            "dockhand_things_total 0\n");
}

TEST(MetricsTest, LabelledChildrenAreExposedInLabelOrder) {
  Registry registry;
  auto& ended = registry.counter("dockhand_ended_total", "Ended.", {"state"});
  ended.labels({"KILLED"}).inc();
  ended.labels({"FAILED"}).inc(2);
  ended.labels({"KILLED"}).inc();
  EXPECT_EQ(registry.expose(),
            "# HELP dockhand_ended_total Ended.\n"
            "# TYPE dockhand_ended_total counter\n"
            "dockhand_ended_total{state=\"FAILED\"} 2\n"
            "dockhand_ended_total{state=\"KILLED\"} 2\n");
}

TEST(MetricsTest, ChildReferenceStaysTheSame) {
  Registry registry;
  auto& family = registry.gauge("dockhand_g", "G.", {"a", "b"});
  Gauge& first = family.labels({"x", "y"});
  family.labels({"z", "w"});
  EXPECT_EQ(&first, &family.labels({"x", "y"}));
}

TEST(MetricsTest, GaugeGoesUpAndDownAndFormatsFractions) {
  Registry registry;
  Gauge& gauge = registry.gauge("dockhand_amount", "Amount.").get();
  gauge.set(2);
  gauge.add(0.5);
  gauge.add(-1);
  EXPECT_DOUBLE_EQ(gauge.value(), 1.5);
  EXPECT_THAT(registry.expose(), HasSubstr("\ndockhand_amount 1.5\n"));
}

TEST(MetricsTest, HistogramBucketsAreCumulativeWithInfSumAndCount) {
  Registry registry;
  auto& family = registry.histogram("dockhand_wait_seconds", "Wait.", {"hook"}, {0.1, 1});
  Histogram& h = family.labels({"launch"});
  h.observe(0.05);
  h.observe(0.1);  // on the bound: counted in it (le is "less or equal")
  h.observe(0.5);
  h.observe(7);
  EXPECT_EQ(registry.expose(),
            "# HELP dockhand_wait_seconds Wait.\n"
            "# TYPE dockhand_wait_seconds histogram\n"
            "dockhand_wait_seconds_bucket{hook=\"launch\",le=\"0.1\"} 2\n"
            "dockhand_wait_seconds_bucket{hook=\"launch\",le=\"1\"} 3\n"
            "dockhand_wait_seconds_bucket{hook=\"launch\",le=\"+Inf\"} 4\n"
            "dockhand_wait_seconds_sum{hook=\"launch\"} 7.65\n"
            "dockhand_wait_seconds_count{hook=\"launch\"} 4\n");
}

TEST(MetricsTest, EscapesLabelValuesAndHelp) {
  Registry registry;
  registry.counter("dockhand_x_total", "Back\\slash and\nnew line.", {"plugin"})
      .labels({"a\"b\\c\nd"})
      .inc();
  const std::string text = registry.expose();
  EXPECT_THAT(text, HasSubstr("# HELP dockhand_x_total Back\\\\slash and\\nnew line.\n"));
  EXPECT_THAT(text, HasSubstr("dockhand_x_total{plugin=\"a\\\"b\\\\c\\nd\"} 1\n"));
}

TEST(MetricsTest, RegisteringAgainReturnsTheSameFamily) {
  Registry registry;
  auto& a = registry.counter("dockhand_calls_total", "Calls.", {"plugin"});
  auto& b = registry.counter("dockhand_calls_total", "Calls.", {"plugin"});
  EXPECT_EQ(&a, &b);
  a.labels({"p"}).inc();
  EXPECT_EQ(b.labels({"p"}).value(), 1U);
}

TEST(MetricsTest, ConflictingRegistrationIsABug) {
  Registry registry;
  registry.counter("dockhand_calls_total", "Calls.", {"plugin"});
  EXPECT_THROW(registry.gauge("dockhand_calls_total", "Calls."), std::logic_error);
  EXPECT_THROW(registry.counter("dockhand_calls_total", "Calls.", {"hook"}), std::logic_error);
  registry.histogram("dockhand_h", "H.", {}, {1, 2});
  EXPECT_THROW(registry.histogram("dockhand_h", "H.", {}, {1, 3}), std::logic_error);
}

TEST(MetricsTest, RefusesInvalidNamesLabelsAndBuckets) {
  Registry registry;
  EXPECT_THROW(registry.counter("1abc", "x"), std::logic_error);
  EXPECT_THROW(registry.counter("a-b", "x"), std::logic_error);
  EXPECT_THROW(registry.counter("ok_total", "x", {"le"}), std::logic_error);
  EXPECT_THROW(registry.counter("ok_total", "x", {"__reserved"}), std::logic_error);
  EXPECT_THROW(registry.counter("ok2_total", "x", {"a:b"}), std::logic_error);
  EXPECT_THROW(registry.histogram("h_seconds", "x", {}, {2, 1}), std::logic_error);
  auto& family = registry.counter("ok3_total", "x", {"a"});
  EXPECT_THROW(family.labels({}), std::logic_error);
  EXPECT_THROW(family.labels({"1", "2"}), std::logic_error);
}

TEST(MetricsTest, CountsFromManyThreadsAreExact) {
  Registry registry;
  Counter& counter = registry.counter("dockhand_n_total", "N.").get();
  Histogram& histogram = registry.histogram("dockhand_d_seconds", "D.", {}, {0.5}).get();
  std::vector<std::thread> threads;
  threads.reserve(4);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 10000; ++i) {
        counter.inc();
        histogram.observe(1);
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(counter.value(), 40000U);
  EXPECT_EQ(histogram.count(), 40000U);
  EXPECT_DOUBLE_EQ(histogram.sum(), 40000);
}

// The output of every kind of family, checked by Prometheus' own parser (promtool, Debian's
// `prometheus` package), which CI installs.
TEST(MetricsTest, ExpositionPassesPromtool) {
  if (!std::filesystem::exists("/usr/bin/promtool")) {
    GTEST_SKIP() << "promtool is not installed (Debian package `prometheus`); not checked";
  }
  Registry registry;
  registry.counter("dockhand_tasks_started_total", "Tasks launched.").get().inc(3);
  registry.counter("dockhand_tasks_ended_total", "Tasks ended by state.", {"state"})
      .labels({"FINISHED"})
      .inc();
  registry.gauge("dockhand_cores", "Cores.", {"state"}).labels({"in_use"}).set(2);
  registry.gauge("dockhand_empty", "A labelled family with no child yet.", {"x"});
  registry
      .histogram("dockhand_task_duration_seconds", "Task duration.", {"runner"}, durationBuckets())
      .labels({"pro\"cess"})
      .observe(0.25);
  const std::filesystem::path file =
      std::filesystem::temp_directory_path() / ("metrics_test_" + std::to_string(::getpid()));
  {
    std::ofstream out(file);
    out << registry.expose();
  }
  const std::string command = "/usr/bin/promtool check metrics < " + file.string() + " 2>&1";
  FILE* pipe = ::popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string output;
  char buffer[512];
  while (std::fgets(buffer, sizeof buffer, pipe) != nullptr) output += buffer;
  const int status = ::pclose(pipe);
  std::filesystem::remove(file);
  EXPECT_EQ(status, 0) << output;
  EXPECT_EQ(output, "") << "promtool's lint findings";
}

// A child that holds `bytes` (touched) in a process group of its own and, with `grandchild`,
// starts one in that group that does the same; each writes one byte to `ready` once its memory
// is resident, then sleeps until killed.
pid_t holdMemory(std::size_t bytes, bool grandchild, int ready) {
  const pid_t pid = ::fork();
  if (pid != 0) return pid;
  if (grandchild) {
    ::setpgid(0, 0);
    holdMemory(bytes, false, ready);
  }
  void* held = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (held == MAP_FAILED) ::_exit(1);
  std::memset(held, 1, bytes);
  const char byte = 1;
  if (::write(ready, &byte, 1) != 1) ::_exit(1);
  for (;;) ::pause();
}

TEST(ProcessStatsTest, DescendantsRssCountsChildrenAndGrandchildren) {
  constexpr std::size_t kHeld = std::size_t{32} << 20;
  const std::uint64_t before = descendantsRssBytes(0);
  int pipe_fds[2] = {-1, -1};
  ASSERT_EQ(::pipe(pipe_fds), 0);
  const pid_t child = holdMemory(kHeld, /*grandchild=*/true, pipe_fds[1]);
  ::close(pipe_fds[1]);  // a child that dies early ends the reads below
  ASSERT_GT(child, 0);
  char bytes[2] = {};
  const bool both_ready =
      ::read(pipe_fds[0], &bytes[0], 1) == 1 && ::read(pipe_fds[0], &bytes[1], 1) == 1;
  const std::uint64_t during = descendantsRssBytes(0);
  ::kill(-child, SIGKILL);  // the child's group: it and its own child
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  ::close(pipe_fds[0]);
  ASSERT_TRUE(both_ready);
  EXPECT_GE(during, before + 2 * kHeld) << "the child's and the grandchild's memory both count";
}

}  // namespace
}  // namespace dockhand::metrics
