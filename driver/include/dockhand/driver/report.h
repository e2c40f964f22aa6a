// What `dockhand-driver run` prints: one line per task, a summary, a progress line.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dockhand/driver/scheduler.h"

namespace dockhand::driver {

// What a text value not in UTF-8 is shown with: "base64:" and its base64 form.
inline constexpr std::string_view kBase64Mark = "base64:";

// The text of a result that is not a value of the built-in runners ({"stdout"}, {"value"},
// {"value_base64"}, or {"block"} not yet fetched): a JSON string's text, any other JSON as JSON
// text; nullopt for those, and for no result (null). A third-party runner may finish a task
// with any JSON (plugin.h).
std::optional<std::string> otherResultText(const Json& result);

// The value of a FINISHED result: a process task's stdout, or a library task's "value" (its
// "value_base64" shown as "base64:<text>"), whitespace-trimmed, newlines shown as " | ", cut
// to `max_chars`.
std::string resultText(const Json& result, std::size_t max_chars = 200);

struct SumResult {
  double sum = 0;
  std::size_t numeric = 0;
  std::vector<std::string> not_numeric;  // task names whose value is not a number
};
// Sums the finished tasks' values (stdout, or a library task's value) parsed as numbers.
// Tasks that declare "outputs" write blocks for other tasks; they are an earlier stage and
// do not count.
SumResult sumResults(const std::vector<TaskRecord>& tasks);

// "part-1  FINISHED  agent-1  attempts=1  12ms  4302"
std::string formatTaskLine(const TaskRecord& task, std::size_t name_width);

// `tasks` says whether the job writes blocks (then the summary counts map reruns and fetches).
std::string formatSummary(const JobSpec& job, const std::vector<TaskRecord>& tasks, JobState state,
                          const Progress& progress, const std::string& failure_reason,
                          std::chrono::milliseconds wall, const std::optional<SumResult>& sum);

// What the job cost, from its tasks' figures (protocol::TaskMetrics), two lines:
//   "cost: cpu 12.3s in 14.1s of task time over 8 tasks; peak memory 120.0 MiB (part-3 on
//    agent-1); inputs 4 blocks, 1.2 MiB fetched in 35ms; outputs 4 blocks, 1.2 MiB"
//   "slowest: part-3 on agent-1 2.1s, part-7 on agent-2 1.9s, part-1 on agent-1 1.8s"
// each part only when some task reported its figures; "" when none did.
std::string formatCost(const std::vector<TaskRecord>& tasks);

// What the agents held at most while the job ran (Scheduler::jobAgentPeaks()), one line:
//   "agent peaks: agent-2 120.0 MiB in tasks, 15.2 MiB itself, 4 blocks (1.2 MiB); agent-1 ..."
// the three with the most in their tasks first, then "; and N more"; "" when none reported.
std::string formatAgentPeaks(const std::map<std::string, protocol::AgentMetrics>& peaks);
// The same as JSON, {"agent-1": {"rss_bytes": N, ...}}: the event log's job_end and
// /v1/cluster's job carry it.
Json agentPeaksJson(const std::map<std::string, protocol::AgentMetrics>& peaks);

// A job's end as formatReport and the event log's job_end read it: views of what someone else
// holds. `run` shows the scheduler's own records (DriverService::endJob, under the service's
// lock: a job of a million tasks is not copied to be printed); `report` shows a JobReport.
struct JobReportView {
  const JobSpec& job;  // its tasks are in `tasks` (Scheduler::job())
  JobState state;
  const Progress& progress;
  const std::string& failure_reason;
  std::chrono::milliseconds wall;
  const std::vector<TaskRecord>& tasks;
  const std::map<std::string, protocol::AgentMetrics>& agent_peaks;
};

// A job's end as `report` replays it from an event log (and tests build it).
struct JobReport {
  JobSpec job;  // without tasks: each task's spec is in its record
  JobState state = JobState::kNone;
  Progress progress;
  std::string failure_reason;
  std::chrono::milliseconds wall{0};
  std::vector<TaskRecord> tasks;
  std::map<std::string, protocol::AgentMetrics> agent_peaks;

  JobReportView view() const {
    return {job, state, progress, failure_reason, wall, tasks, agent_peaks};
  }
};
// The task lines, the cost and the agent peaks (unless `quiet`), then the summary; each line
// ends in "\n".
std::string formatReport(const JobReportView& report, bool quiet);

// "[job] 3/8 done, 2 running, 0 failed, 0 retried", then tasks waiting for blocks and
// every decommission in progress ("| agent-1 decommissioning: 3/8 blocks moved, ...").
std::string formatProgress(const std::string& job_name, const Progress& progress);
// "agent-1 decommissioning (migrating): 2/4 blocks moved, 2 left, 0 failed, 1.1 KiB/2.3 KiB
// moved", then ", 1.1 KiB/s, about 1200ms left" once the agent reports its rate.
std::string formatDecommission(const DecommissionProgress& progress);

// 1234 ms -> "1234ms", 12345 ms -> "12.3s".
std::string formatDuration(std::chrono::milliseconds d);

// 512 -> "512 B", 1536 -> "1.5 KiB".
std::string formatBytes(std::uint64_t bytes);

// `text` with every character that means something in HTML as its character reference (the
// status page's template values, the timeline page).
std::string htmlEscape(std::string_view text);

// 1234567.0 -> "1234567", 2.5 -> "2.5".
std::string formatNumber(double value);

}  // namespace dockhand::driver
