// The event log (event_log.h): what the driver writes, read back into the report the run
// printed and into the launches a timeline draws; a log it cannot read says why.
#include "dockhand/driver/event_log.h"

#include <fstream>
#include <sstream>
#include <vector>

#include <gtest/gtest.h>

#include "dockhand/driver/timeline.h"
#include "test_processes.h"

namespace dockhand::driver {
namespace {

using dockhand::testing::TempDir;

// A job of two tasks: "map" finished on its first launch, "bad" failed twice.
JobReport twoTaskJob() {
  JobReport report;
  report.job.name = "wc";
  report.job.aggregate = Aggregate::kSum;
  report.tasks.resize(2);
  report.tasks[0].spec.name = "map";
  report.tasks[0].spec.outputs = {"shuffle_0_0_0"};
  report.tasks[1].spec.name = "bad";
  report.state = JobState::kFailed;
  report.failure_reason = "task 'bad' failed 2 time(s), the limit";
  report.wall = Millis(1234);
  report.progress.total = 2;
  report.progress.finished = 1;
  report.progress.failed = 1;
  report.progress.retries = 1;
  return report;
}

protocol::TaskDescription launch(std::uint64_t id, const std::string& name, int attempt) {
  protocol::TaskDescription task;
  task.task_id = id;
  task.name = name;
  task.attempt = attempt;
  return task;
}

TEST(EventLogTest, ALoggedJobReadsBackIntoTheSameReport) {
  TempDir dir;
  const auto path = (dir.path() / "events.jsonl").string();
  JobReport live = twoTaskJob();
  {
    auto opened = EventLog::open(path);
    ASSERT_TRUE(opened) << opened.error().message;
    EventLog& log = **opened;
    AgentInfo agent;
    agent.id = "agent-1";
    agent.cores = 2;
    log.agentAdded(agent);
    log.jobStarted(live.job, live.tasks);
    log.taskStarted("wc", 0, launch(1, "map", 0), "agent-1", /*ahead=*/false);
    log.taskStarted("wc", 1, launch(2, "bad", 0), "agent-1", /*ahead=*/true);

    protocol::StatusUpdate failed;
    failed.task_id = 2;
    failed.state = protocol::TaskState::kFailed;
    TaskRecord& bad = live.tasks[1];
    bad.outcome = TaskOutcome::kPending;  // sent back for another attempt
    bad.launches = 1;
    bad.agent_id = "agent-1";
    bad.reason = "exited with code 3";
    bad.exit_code = 3;
    bad.stderr_tail = "oops";
    bad.duration = Millis(15);
    log.taskEnded("wc", 1, bad, failed.task_id, failed.state, "agent-1");
    log.taskStarted("wc", 1, launch(3, "bad", 1), "agent-1", /*ahead=*/false);

    protocol::StatusUpdate finished;
    finished.task_id = 1;
    finished.state = protocol::TaskState::kFinished;
    TaskRecord& map = live.tasks[0];
    map.outcome = TaskOutcome::kFinished;
    map.launches = 1;
    map.agent_id = "agent-1";
    map.result = {{"exit_code", 0}, {"stdout", ""}};
    map.duration = Millis(700);
    map.metrics.cpu_time_ms = 650;
    map.metrics.peak_rss_bytes = 1 << 20;
    map.metrics.output_blocks = 1;
    map.metrics.output_bytes = 10;
    log.taskEnded("wc", 0, map, finished.task_id, finished.state, "agent-1");
    protocol::UpdateBlockInfo blocks;
    blocks.added.push_back(
        {.id = "shuffle_0_0_0", .size = 10, .checksum = {}, .executor_id = "agent-1", .url = {}});
    log.blocksUpdated("agent-1", blocks);

    failed.task_id = 3;
    bad.outcome = TaskOutcome::kFailed;
    bad.launches = 2;
    bad.duration = Millis(20);
    log.taskEnded("wc", 1, bad, failed.task_id, failed.state, "agent-1");
    log.agentRemoved("agent-1", "stopped by the driver");
    live.agent_peaks["agent-1"] = {.rss_bytes = 15 << 20,
                                   .peak_rss_bytes = std::nullopt,
                                   .cpu_time_ms = std::nullopt,
                                   .tasks_rss_bytes = 120 << 20,
                                   .peak_tasks_rss_bytes = std::nullopt,
                                   .blocks = 1,
                                   .block_bytes = 10};
    log.jobEnded(live.view());
  }
  {
    // Each launch says whether it was sent ahead of its agent's free cores.
    std::ifstream lines(path);
    std::vector<bool> ahead;
    for (std::string line; std::getline(lines, line);) {
      const Json event = Json::parse(line);
      if (event["event"] == "task_start") ahead.push_back(event.at("ahead").get<bool>());
    }
    EXPECT_EQ(ahead, (std::vector<bool>{false, true, false}));
  }
  std::ifstream in(path);
  auto jobs = readEventLog(in, path);
  ASSERT_TRUE(jobs) << jobs.error().message;
  ASSERT_EQ(jobs->size(), 1u);
  const LoggedJob& job = jobs->front();
  EXPECT_TRUE(job.ended);
  EXPECT_EQ(formatReport(job.report.view(), false), formatReport(live.view(), false));
  EXPECT_NE(formatReport(job.report.view(), false).find("cpu=650ms"), std::string::npos);
  EXPECT_NE(formatReport(job.report.view(), false)
                .find("agent peaks: agent-1 120.0 MiB in tasks, 15.0 MiB itself, 1 blocks (10 B)"),
            std::string::npos)
      << formatReport(job.report.view(), false);

  ASSERT_EQ(job.attempts.size(), 3u);
  EXPECT_EQ(job.attempts[0].task, "map");
  EXPECT_EQ(job.attempts[0].state, "FINISHED");
  EXPECT_EQ(job.attempts[1].state, "FAILED");
  EXPECT_EQ(job.attempts[2].task_id, 3u);
  EXPECT_EQ(job.attempts[2].state, "FAILED");
  for (const auto& a : job.attempts) EXPECT_GE(a.end_ms, a.start_ms) << a.task;

  const std::string html = timelineHtml(*jobs, "events.jsonl");
  std::size_t bars = 0;
  for (auto at = html.find("<rect class=\"task "); at != std::string::npos;
       at = html.find("<rect class=\"task ", at + 1)) {
    ++bars;
  }
  EXPECT_EQ(bars, 3u);
  EXPECT_NE(html.find("class=\"task failed\" data-task=\"bad\""), std::string::npos);
}

TEST(EventLogTest, AppendsAndSkipsWhatItDoesNotKnow) {
  TempDir dir;
  const auto path = dir.path() / "events.jsonl";
  for (int run = 0; run < 2; ++run) {
    auto opened = EventLog::open(path.string());
    ASSERT_TRUE(opened);
    JobReport report = twoTaskJob();
    report.job.name = "job-" + std::to_string(run);
    (*opened)->jobStarted(report.job, report.tasks);
    (*opened)->jobEnded(report.view());
  }
  {
    std::ofstream(path, std::ios::app) << "{\"event\": \"from_a_newer_driver\"}\nnot json\n"
                                       << "{\"event\": \"task_end\", \"job\": \"nobody\"}\n";
  }
  std::ifstream in(path);
  auto jobs = readEventLog(in, "e");
  ASSERT_TRUE(jobs) << jobs.error().message;
  ASSERT_EQ(jobs->size(), 2u);
  EXPECT_EQ((*jobs)[1].report.job.name, "job-1");
}

TEST(EventLogTest, ALogItCannotReadSaysWhy) {
  std::istringstream foreign("{\"hello\": 1}\n");
  auto jobs = readEventLog(foreign, "x.jsonl");
  ASSERT_FALSE(jobs);
  EXPECT_EQ(jobs.error().message,
            "x.jsonl:1: not a Dockhand event log (it does not begin with a \"log_start\" event)");
  std::istringstream newer("{\"event\": \"log_start\", \"version\": 99}\n");
  jobs = readEventLog(newer, "y.jsonl");
  ASSERT_FALSE(jobs);
  EXPECT_EQ(jobs.error().message,
            "y.jsonl:1: event log format version 99 is newer than this driver reads (1)");
  EXPECT_EQ(EventLog::open("/nonexistent/dir/e.jsonl").error().message,
            "cannot open the event log /nonexistent/dir/e.jsonl: No such file or directory");
}

}  // namespace
}  // namespace dockhand::driver
