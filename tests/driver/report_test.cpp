#include "dockhand/driver/report.h"

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include <gtest/gtest.h>

#include "dockhand/driver/results_dir.h"

namespace dockhand::driver {
namespace {

TaskRecord finished(const std::string& name, const std::string& out) {
  TaskRecord t;
  t.spec.name = name;
  t.outcome = TaskOutcome::kFinished;
  t.launches = 1;
  t.agent_id = "agent-1";
  t.result = {{"exit_code", 0}, {"stdout", out}, {"stdout_truncated", false}};
  return t;
}

TEST(ReportTest, SumsNumericStdoutAndNamesTheRest) {
  std::vector<TaskRecord> tasks = {finished("a", "  120\n"), finished("b", "3"),
                                   finished("c", "n/a\n")};
  SumResult sum = sumResults(tasks);
  EXPECT_EQ(sum.sum, 123);
  EXPECT_EQ(sum.numeric, 2u);
  EXPECT_EQ(sum.not_numeric, std::vector<std::string>{"c"});
}

TaskRecord finishedLibrary(const std::string& name, const Json& result) {
  TaskRecord t = finished(name, "");
  t.result = result;
  return t;
}

TEST(ReportTest, LibraryValuesAreShownAndSummedLikeStdout) {
  std::vector<TaskRecord> tasks = {
      finishedLibrary("a", {{"value", "40\n"}, {"bytes", 3}, {"duration_ms", 1}}),
      finishedLibrary("b", {{"value", "2"}, {"block", "task_9_result"}, {"bytes", 1}}),
      finishedLibrary("c", {{"value_base64", "AAE="}, {"bytes", 2}}), finished("d", "100")};
  SumResult sum = sumResults(tasks);
  EXPECT_EQ(sum.sum, 142);
  EXPECT_EQ(sum.numeric, 3u);
  EXPECT_EQ(sum.not_numeric, std::vector<std::string>{"c"});
  EXPECT_NE(formatTaskLine(tasks[0], 4).find("  40"), std::string::npos);
  EXPECT_EQ(resultText(tasks[2].result), "base64:AAE=");
  EXPECT_NE(formatTaskLine(tasks[2], 4).find("base64:AAE="), std::string::npos);
}

TEST(ReportTest, TaskLineShowsStateAgentAttemptsAndTrimmedStdout) {
  std::string line = formatTaskLine(finished("part-1", "line one\nline two\n"), 8);
  EXPECT_NE(line.find("part-1"), std::string::npos);
  EXPECT_NE(line.find("FINISHED"), std::string::npos);
  EXPECT_NE(line.find("agent-1"), std::string::npos);
  EXPECT_NE(line.find("attempts=1"), std::string::npos);
  EXPECT_NE(line.find("line one | line two"), std::string::npos);
}

TEST(ReportTest, AFailedTaskLineNamesItsStdoutLog) {
  TaskRecord t;
  t.spec.name = "breaks";
  t.outcome = TaskOutcome::kFailed;
  t.launches = 1;
  t.agent_id = "agent-1";
  t.reason = "exited with code 3";
  t.log_urls = {{"stdout", "http://w:7337/v1/tasks/4/logs/stdout"},
                {"stderr", "http://w:7337/v1/tasks/4/logs/stderr"}};
  const std::string line = formatTaskLine(t, 6);
  EXPECT_NE(line.find("  stdout log: http://w:7337/v1/tasks/4/logs/stdout"), std::string::npos)
      << line;
  // A finished task's line shows its result, not where its log is.
  TaskRecord ok = finished("fine", "1\n");
  ok.log_urls = t.log_urls;
  EXPECT_EQ(formatTaskLine(ok, 6).find("stdout log"), std::string::npos);
}

TEST(ReportTest, TaskLineAndCostShowWhatTasksCost) {
  std::vector<TaskRecord> tasks = {finished("map-0", ""), finished("map-1", ""),
                                   finished("reduce", "42")};
  tasks[0].duration = Millis(1200);
  tasks[0].metrics.cpu_time_ms = 900;
  tasks[0].metrics.run_time_ms = 1150;
  tasks[0].metrics.peak_rss_bytes = 50u << 20;
  tasks[0].metrics.output_blocks = 1;
  tasks[0].metrics.output_bytes = 3072;
  tasks[1].duration = Millis(300);
  tasks[1].agent_id = "agent-2";
  tasks[1].metrics.cpu_time_ms = 100;
  tasks[1].metrics.run_time_ms = 250;
  tasks[1].metrics.peak_rss_bytes = 120u << 20;
  tasks[1].metrics.output_blocks = 1;
  tasks[1].metrics.output_bytes = 1024;
  tasks[2].duration = Millis(40);
  tasks[2].metrics.input_blocks = 2;
  tasks[2].metrics.input_bytes = 4096;
  tasks[2].metrics.input_fetch_ms = 7;

  const std::string line = formatTaskLine(tasks[0], 6);
  EXPECT_NE(line.find("1200ms  cpu=900ms    rss=50.0 MiB"), std::string::npos) << line;
  EXPECT_EQ(line.back(), 'B') << "no padding at the end: '" << line << "'";
  EXPECT_EQ(formatTaskLine(tasks[2], 6).find("cpu="), std::string::npos)
      << "no figure where none was measured";

  EXPECT_EQ(formatCost(tasks),
            "cost: cpu 1000ms in 1400ms of task time over 2 task(s); peak memory 120.0 MiB "
            "(map-1 on agent-2); inputs 2 block(s), 4.0 KiB fetched in 7ms; outputs 2 block(s), "
            "4.0 KiB\n"
            "slowest: map-0 on agent-1 1200ms, map-1 on agent-2 300ms, reduce on agent-1 40ms\n");
  EXPECT_EQ(formatCost({finished("a", "1")}), "") << "nothing measured, nothing said";
}

TEST(ReportTest, AgentPeaksListTheAgentsWithTheMostInTheirTasksFirst) {
  std::map<std::string, protocol::AgentMetrics> peaks;
  EXPECT_EQ(formatAgentPeaks(peaks), "") << "no heartbeat during the job, nothing said";
  peaks["a1"].tasks_rss_bytes = 1 << 20;
  peaks["a1"].rss_bytes = 10 << 20;
  peaks["a2"].tasks_rss_bytes = 300 << 20;
  peaks["a3"].rss_bytes = 12 << 20;  // an agent whose tasks ran no process of their own
  peaks["a3"].blocks = 2;
  peaks["a3"].block_bytes = 2048;
  EXPECT_EQ(formatAgentPeaks(peaks),
            "agent peaks: a2 300.0 MiB in tasks; a1 1.0 MiB in tasks, 10.0 MiB itself; a3 "
            "12.0 MiB itself, 2 blocks (2.0 KiB)\n");
  peaks["a4"].tasks_rss_bytes = 2 << 20;
  EXPECT_EQ(formatAgentPeaks(peaks),
            "agent peaks: a2 300.0 MiB in tasks; a4 2.0 MiB in tasks; a1 1.0 MiB in tasks, "
            "10.0 MiB itself; and 1 more\n");
}

TEST(ReportTest, SumLeavesOutTasksThatWriteBlocks) {
  std::vector<TaskRecord> tasks = {finished("map", ""), finished("reduce-0", "7"),
                                   finished("reduce-1", "5")};
  tasks[0].spec.outputs = {"shuffle_0_0_0"};
  SumResult sum = sumResults(tasks);
  EXPECT_EQ(sum.sum, 12);
  EXPECT_TRUE(sum.not_numeric.empty());
}

TEST(ReportTest, SummaryCountsMapRerunsOnlyForJobsWithBlocks) {
  JobSpec job;
  job.name = "plain";
  std::vector<TaskRecord> plain(1);
  Progress p;
  p.total = 1;
  p.finished = 1;
  std::string line =
      formatSummary(job, plain, JobState::kSucceeded, p, "", Millis(10), std::nullopt);
  EXPECT_EQ(line.find("rerun"), std::string::npos) << line;

  std::vector<TaskRecord> staged = plain;
  staged[0].spec.outputs = {"b0"};
  p.reruns_for_lost_blocks = 2;
  line = formatSummary(job, staged, JobState::kSucceeded, p, "", Millis(10), std::nullopt);
  EXPECT_NE(line.find("2 map tasks rerun for lost blocks"), std::string::npos) << line;
}

TEST(ReportTest, ProgressShowsWaitingTasksAndDecommissions) {
  Progress p;
  p.total = 6;
  p.finished = 2;
  p.waiting_for_inputs = 2;
  DecommissionProgress d;
  d.agent_id = "agent-1";
  d.state = "migrating";
  d.blocks_migrated = 1;
  d.blocks_failed = 1;
  d.blocks_left = 3;  // the one that failed is still there
  d.bytes_migrated = 1536;
  d.bytes_left = 2560;
  p.decommissions.push_back(d);
  std::string line = formatProgress("wc", p);
  EXPECT_NE(line.find("2 waiting for blocks"), std::string::npos) << line;
  EXPECT_NE(line.find("agent-1 decommissioning (migrating): 1/4 blocks moved, 3 left, 1 failed, "
                      "1.5 KiB/4.0 KiB moved"),
            std::string::npos)
      << line;
}

TEST(ReportTest, NumbersPrintWithoutNeedlessDecimals) {
  EXPECT_EQ(formatNumber(1234567), "1234567");
  EXPECT_EQ(formatNumber(2.5), "2.5");
}

TEST(ReportTest, AnotherRunnersResultIsShownAsItsText) {
  EXPECT_EQ(resultText(Json("done after 50 ms")), "done after 50 ms");
  EXPECT_EQ(resultText(Json{{"count", 3}}), R"({"count":3})");
  EXPECT_EQ(resultText(Json(7)), "7");
  EXPECT_EQ(resultText(Json()), "");
  EXPECT_EQ(otherResultText(Json{{"block", "task_1_result"}}), std::nullopt);
  EXPECT_EQ(otherResultText(Json{{"value", "x"}}), std::nullopt);
}

TEST(ResultsDirTest, FileNamesKeepPlainCharactersOnly) {
  EXPECT_EQ(resultFileName("part-1.out_2"), "part-1.out_2");
  EXPECT_EQ(resultFileName("../etc/passwd"), ".._etc_passwd");
  EXPECT_EQ(resultFileName(".."), "_");
  EXPECT_EQ(resultFileName(""), "_");
  EXPECT_EQ(resultFileName("naïve task"), "na__ve_task");
}

TEST(ResultsDirTest, ALibraryValueIsWrittenAsItsBytesAndAnUnfetchedOneIsNamed) {
  char templ[] = "/tmp/dockhand-results-test-XXXXXX";
  ASSERT_NE(::mkdtemp(templ), nullptr);
  const std::filesystem::path dir = templ;
  TaskRecord failed;
  failed.spec.name = "broken";
  failed.outcome = TaskOutcome::kFailed;
  failed.reason = "exit code 3";
  std::vector<TaskRecord> tasks = {finishedLibrary("bin", {{"value_base64", "AP8B"}}),
                                   finishedLibrary("json", {{"count", 3}}),
                                   finishedLibrary("late", {{"block", "task_9_result"}}), failed};
  auto written = writeResultsDir(dir.string(), tasks);
  ASSERT_TRUE(written.ok()) << written.error().message;
  EXPECT_EQ(*written, 2U);
  std::ifstream in(dir / "bin", std::ios::binary);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), std::string("\x00\xff\x01", 3));
  EXPECT_FALSE(std::filesystem::exists(dir / "late"));
  std::ifstream index_in(dir / "results.json");
  const Json index = Json::parse(index_in);
  std::ifstream json_in(dir / "json");
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(json_in), {}), R"({"count":3})");
  EXPECT_NE(index[2]["reason"].get<std::string>().find("task_9_result"), std::string::npos);
  EXPECT_EQ(index[3]["outcome"], "FAILED");
  EXPECT_EQ(index[3]["reason"], "exit code 3");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace dockhand::driver
