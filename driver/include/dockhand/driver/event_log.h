// The event log (docs/driver.md, "Event log"): what happened to a job and to the cluster, one
// JSON object a line, written as it happens (`run --event-log FILE`, `serve --event-log FILE`
// or the config's `event_log`), and read back by `dockhand-driver report FILE` into the report
// the live run printed and a timeline page.
//
// Writing: EventLog's calls come from DriverService with its mutex held, so the log needs no
// lock of its own; lines are buffered and flushed at every job and agent event, and at least
// once a second while tasks end. A write that fails is logged once and the job goes on.
#pragma once

#include <cstdint>
#include <cstdio>
#include <istream>
#include <memory>
#include <string>
#include <vector>

#include "dockhand/base/result.h"
#include "dockhand/driver/report.h"
#include "dockhand/driver/scheduler.h"

namespace dockhand::driver {

// The event log's format version ("log_start"'s "version"): a reader refuses a larger one.
inline constexpr int kEventLogVersion = 1;

class EventLog {
 public:
  // Opens `path` for appending (created 0644 when missing) and writes "log_start".
  static Result<std::unique_ptr<EventLog>> open(const std::string& path);
  ~EventLog();
  EventLog(const EventLog&) = delete;
  EventLog& operator=(const EventLog&) = delete;

  // `tasks`: the job's tasks as submitted (Scheduler::tasks(): the specs are in the records).
  void jobStarted(const JobSpec& job, const std::vector<TaskRecord>& tasks);
  // `ahead`: the launch was sent beyond the agent's free cores (Action::ahead).
  void taskStarted(const std::string& job, std::size_t index, const protocol::TaskDescription& task,
                   const std::string& agent_id, bool ahead);
  // `record` as the scheduler left it after launch `task_id`'s update to `state` (its outcome,
  // attempts, duration and what the update said).
  void taskEnded(const std::string& job, std::size_t index, const TaskRecord& record,
                 std::uint64_t task_id, protocol::TaskState state, const std::string& agent_id);
  void agentAdded(const AgentInfo& agent);
  void agentRemoved(const std::string& agent_id, const std::string& reason);
  void agentDecommissioning(const std::string& agent_id, const std::string& reason);
  void blocksUpdated(const std::string& agent_id, const protocol::UpdateBlockInfo& update);
  void jobEnded(const JobReportView& report);

 private:
  EventLog(std::FILE* file, std::string path);
  void write(const std::string& event, const Json& fields, bool flush_now);

  std::FILE* file_;
  std::string path_;
  bool failed_ = false;  // a write failed (logged once)
  std::int64_t last_flush_ms_ = 0;
};

// One launch of a task as the log tells it, for the timeline: times in ms since the epoch;
// end_ms is 0 while it had not ended when the log stops.
struct LoggedAttempt {
  std::string task;
  std::uint64_t task_id = 0;
  std::string agent;
  std::int64_t start_ms = 0;
  std::int64_t end_ms = 0;
  std::string state;  // its terminal state, "" when not ended
};

struct LoggedJob {
  JobReport report;
  bool ended = false;  // a "job_end" was logged
  std::int64_t start_ms = 0;
  std::int64_t end_ms = 0;
  std::vector<LoggedAttempt> attempts;
};

// Reads an event log. A line that is not a JSON object, an event of an unknown kind, or a
// task of an unknown job is skipped (a newer driver's events); a log of a newer format
// version, or one without "log_start", is an error naming the line.
Result<std::vector<LoggedJob>> readEventLog(std::istream& in, const std::string& source);

}  // namespace dockhand::driver
