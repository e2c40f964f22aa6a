#include "dockhand/driver/event_log.h"

#include <fcntl.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <optional>
#include <utility>

#include <fmt/format.h>

#include "dockhand/base/logging.h"
#include "dockhand/protocol/auth.h"

namespace dockhand::driver {

namespace {

constexpr std::int64_t kFlushEveryMs = 1000;

Json taskList(const std::vector<TaskRecord>& records) {
  Json tasks = Json::array();
  for (const auto& record : records) {
    const TaskSpec& t = record.spec;
    tasks.push_back({{"name", t.name}, {"inputs", t.inputs}, {"outputs", t.outputs}});
  }
  return tasks;
}

std::optional<TaskOutcome> outcomeNamed(std::string_view name) {
  for (auto outcome : {TaskOutcome::kPending, TaskOutcome::kRunning, TaskOutcome::kFinished,
                       TaskOutcome::kFailed, TaskOutcome::kKilled, TaskOutcome::kCancelled}) {
    if (toString(outcome) == name) return outcome;
  }
  return std::nullopt;
}

std::optional<JobState> jobStateNamed(std::string_view name) {
  for (auto state :
       {JobState::kNone, JobState::kRunning, JobState::kSucceeded, JobState::kFailed}) {
    if (toString(state) == name) return state;
  }
  return std::nullopt;
}

// The progress figures the summary line shows.
constexpr std::array<std::pair<const char*, std::size_t Progress::*>, 7> kProgressFields = {{
    {"total", &Progress::total},
    {"finished", &Progress::finished},
    {"failed", &Progress::failed},
    {"retries", &Progress::retries},
    {"relaunches_after_loss", &Progress::relaunches_after_loss},
    {"reruns_for_lost_blocks", &Progress::reruns_for_lost_blocks},
    {"fetch_failures", &Progress::fetch_failures},
}};

template <class T>
T valueOr(const Json& object, const char* key, T fallback) {
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) return fallback;
  try {
    return it->get<T>();
  } catch (const Json::exception&) {
    return fallback;
  }
}

}  // namespace

// ---- writing ---------------------------------------------------------------------------------

Result<std::unique_ptr<EventLog>> EventLog::open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) {
    return Error(fmt::format("cannot open the event log {}: {}", path, std::strerror(errno)));
  }
  std::FILE* file = ::fdopen(fd, "a");
  if (file == nullptr) {
    const int error = errno;
    ::close(fd);
    return Error(fmt::format("cannot open the event log {}: {}", path, std::strerror(error)));
  }
  std::unique_ptr<EventLog> log(new EventLog(file, path));
  log->write("log_start", {{"version", kEventLogVersion}}, /*flush_now=*/true);
  return log;
}

EventLog::EventLog(std::FILE* file, std::string path) : file_(file), path_(std::move(path)) {}

EventLog::~EventLog() {
  if (std::fclose(file_) != 0 && !failed_) {
    logger("driver")->error("event log {}: {}", path_, std::strerror(errno));
  }
}

void EventLog::write(const std::string& event, const Json& fields, bool flush_now) {
  const std::int64_t now = protocol::auth::wallClockMs();
  Json line = {{"event", event}, {"time_ms", now}};
  line.update(fields);
  std::string text = line.dump(-1, ' ', false, Json::error_handler_t::replace);
  text += '\n';
  bool ok = std::fwrite(text.data(), 1, text.size(), file_) == text.size();
  if (ok && (flush_now || now - last_flush_ms_ >= kFlushEveryMs)) {
    ok = std::fflush(file_) == 0;
    last_flush_ms_ = now;
  }
  if (!ok && !failed_) {
    failed_ = true;
    logger("driver")->error(
        "cannot write the event log {}: {}; later events may be missing from it", path_,
        std::strerror(errno));
  }
}

void EventLog::jobStarted(const JobSpec& job, const std::vector<TaskRecord>& tasks) {
  write("job_start",
        {{"job", job.name},
         {"aggregate", job.aggregate == Aggregate::kSum ? "sum" : "none"},
         {"tasks", taskList(tasks)}},
        /*flush_now=*/true);
}

void EventLog::taskStarted(const std::string& job, std::size_t index,
                           const protocol::TaskDescription& task, const std::string& agent_id,
                           bool ahead) {
  write("task_start",
        {{"job", job},
         {"index", index},
         {"task", task.name},
         {"task_id", task.task_id},
         {"attempt", task.attempt},
         {"agent", agent_id},
         {"ahead", ahead}},
        /*flush_now=*/false);
}

void EventLog::taskEnded(const std::string& job, std::size_t index, const TaskRecord& record,
                         std::uint64_t task_id, protocol::TaskState state,
                         const std::string& agent_id) {
  Json fields = {{"job", job},
                 {"index", index},
                 {"task", record.spec.name},
                 {"task_id", task_id},
                 {"agent", agent_id},
                 {"state", std::string(protocol::toString(state))},
                 {"outcome", std::string(toString(record.outcome))},
                 {"attempts", record.launches},
                 {"duration_ms", record.duration.count()},
                 {"metrics", protocol::toJson(record.metrics)}};
  if (!record.result.is_null()) fields["result"] = record.result;
  if (!record.reason.empty()) fields["reason"] = record.reason;
  if (record.exit_code) fields["exit_code"] = *record.exit_code;
  if (record.signal) fields["signal"] = *record.signal;
  if (!record.stderr_tail.empty()) fields["stderr_tail"] = record.stderr_tail;
  if (!record.log_urls.empty()) fields["log_urls"] = record.log_urls;
  write("task_end", fields, /*flush_now=*/false);
}

void EventLog::agentAdded(const AgentInfo& agent) {
  write("agent_added",
        {{"agent", agent.id},
         {"host", agent.host},
         {"cores", agent.cores},
         {"resources", agent.resources},
         {"block_url", agent.block_url}},
        /*flush_now=*/true);
}

void EventLog::agentRemoved(const std::string& agent_id, const std::string& reason) {
  write("agent_removed", {{"agent", agent_id}, {"reason", reason}}, /*flush_now=*/true);
}

void EventLog::agentDecommissioning(const std::string& agent_id, const std::string& reason) {
  write("agent_decommissioning", {{"agent", agent_id}, {"reason", reason}}, /*flush_now=*/true);
}

void EventLog::blocksUpdated(const std::string& agent_id, const protocol::UpdateBlockInfo& update) {
  Json added = Json::array();
  for (const auto& block : update.added) {
    added.push_back({{"id", block.id}, {"size", block.size}, {"holder", block.executor_id}});
  }
  write("blocks", {{"agent", agent_id}, {"added", added}, {"removed", update.removed}},
        /*flush_now=*/false);
}

void EventLog::jobEnded(const JobReportView& report) {
  Json progress = Json::object();
  for (const auto& [name, member] : kProgressFields) progress[name] = report.progress.*member;
  Json tasks = Json::array();
  for (const auto& t : report.tasks) {
    tasks.push_back({{"outcome", std::string(toString(t.outcome))}, {"attempts", t.launches}});
  }
  write("job_end",
        {{"job", report.job.name},
         {"state", std::string(toString(report.state))},
         {"failure_reason", report.failure_reason},
         {"wall_ms", report.wall.count()},
         {"progress", std::move(progress)},
         {"tasks", std::move(tasks)},
         {"agent_peaks", agentPeaksJson(report.agent_peaks)}},
        /*flush_now=*/true);
}

// ---- reading ---------------------------------------------------------------------------------

namespace {

// Fills `record` from a task_end event.
void applyTaskEnd(TaskRecord& record, const Json& event) {
  if (auto outcome = outcomeNamed(valueOr<std::string>(event, "outcome", ""))) {
    record.outcome = *outcome;
  }
  record.launches = valueOr<int>(event, "attempts", record.launches);
  record.task_id = valueOr<std::uint64_t>(event, "task_id", record.task_id);
  record.agent_id = valueOr<std::string>(event, "agent", record.agent_id);
  record.duration = Millis(valueOr<std::int64_t>(event, "duration_ms", 0));
  record.result = event.value("result", Json());
  record.reason = valueOr<std::string>(event, "reason", "");
  record.exit_code.reset();
  record.signal.reset();
  if (event.contains("exit_code")) record.exit_code = valueOr<int>(event, "exit_code", 0);
  if (event.contains("signal")) record.signal = valueOr<int>(event, "signal", 0);
  record.stderr_tail = valueOr<std::string>(event, "stderr_tail", "");
  record.log_urls = valueOr<std::map<std::string, std::string>>(event, "log_urls", {});
  record.metrics = protocol::taskMetricsFromJson(event.value("metrics", Json::object()), nullptr);
}

}  // namespace

Result<std::vector<LoggedJob>> readEventLog(std::istream& in, const std::string& source) {
  std::vector<LoggedJob> jobs;
  std::string line;
  std::size_t number = 0;
  bool started = false;
  // The job a task event names: the latest one of that name.
  auto job_named = [&](const Json& event) -> LoggedJob* {
    const auto name = valueOr<std::string>(event, "job", "");
    for (std::size_t i = jobs.size(); i-- > 0;) {  // the latest of that name
      if (jobs[i].report.job.name == name) return &jobs[i];
    }
    return nullptr;
  };
  while (std::getline(in, line)) {
    ++number;
    if (line.empty()) continue;
    Json event = Json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!event.is_object()) continue;  // a line cut short by a crash, or not ours
    const auto kind = valueOr<std::string>(event, "event", "");
    const auto time_ms = valueOr<std::int64_t>(event, "time_ms", 0);
    if (kind == "log_start") {
      const int version = valueOr<int>(event, "version", 0);
      if (version > kEventLogVersion) {
        return Error(
            fmt::format("{}:{}: event log format version {} is newer than this driver reads ({})",
                        source, number, version, kEventLogVersion));
      }
      started = true;
      continue;
    }
    if (!started) {
      return Error(
          fmt::format("{}:{}: not a Dockhand event log (it does not begin with a "
                      "\"log_start\" event)",
                      source, number));
    }
    if (kind == "job_start") {
      LoggedJob job;
      job.start_ms = time_ms;
      job.report.job.name = valueOr<std::string>(event, "job", "");
      job.report.job.aggregate = valueOr<std::string>(event, "aggregate", "") == "sum"
                                     ? Aggregate::kSum
                                     : Aggregate::kNone;
      job.report.state = JobState::kRunning;
      for (const auto& t : event.value("tasks", Json::array())) {
        TaskRecord record;
        record.spec.name = valueOr<std::string>(t, "name", "");
        record.spec.inputs = valueOr<std::vector<std::string>>(t, "inputs", {});
        record.spec.outputs = valueOr<std::vector<std::string>>(t, "outputs", {});
        job.report.tasks.push_back(std::move(record));
      }
      jobs.push_back(std::move(job));
      continue;
    }
    LoggedJob* job = (kind == "task_start" || kind == "task_end" || kind == "job_end")
                         ? job_named(event)
                         : nullptr;
    if (job == nullptr) continue;  // agent and block events, or a task of an unknown job
    const auto index = valueOr<std::size_t>(event, "index", job->report.tasks.size());
    if (kind == "task_start" && index < job->report.tasks.size()) {
      TaskRecord& record = job->report.tasks[index];
      record.outcome = TaskOutcome::kRunning;
      record.agent_id = valueOr<std::string>(event, "agent", "");
      record.task_id = valueOr<std::uint64_t>(event, "task_id", 0);
      record.launches = valueOr<int>(event, "attempt", 0) + 1;
      job->attempts.push_back(LoggedAttempt{.task = record.spec.name,
                                            .task_id = record.task_id,
                                            .agent = record.agent_id,
                                            .start_ms = time_ms,
                                            .end_ms = 0,
                                            .state = {}});
    } else if (kind == "task_end" && index < job->report.tasks.size()) {
      applyTaskEnd(job->report.tasks[index], event);
      const auto task_id = valueOr<std::uint64_t>(event, "task_id", 0);
      for (std::size_t i = job->attempts.size(); i-- > 0;) {  // its latest launch
        LoggedAttempt& attempt = job->attempts[i];
        if (attempt.task_id != task_id) continue;
        attempt.end_ms = time_ms;
        attempt.state = valueOr<std::string>(event, "state", "");
        break;
      }
    } else if (kind == "job_end") {
      job->ended = true;
      job->end_ms = time_ms;
      auto& report = job->report;
      report.state = jobStateNamed(valueOr<std::string>(event, "state", "")).value_or(report.state);
      report.failure_reason = valueOr<std::string>(event, "failure_reason", "");
      report.wall = Millis(valueOr<std::int64_t>(event, "wall_ms", 0));
      const Json progress = event.value("progress", Json::object());
      for (const auto& [name, member] : kProgressFields) {
        report.progress.*member = valueOr<std::size_t>(progress, name, 0);
      }
      const Json tasks = event.value("tasks", Json::array());
      for (std::size_t i = 0; i < tasks.size() && i < report.tasks.size(); ++i) {
        if (auto outcome = outcomeNamed(valueOr<std::string>(tasks[i], "outcome", ""))) {
          report.tasks[i].outcome = *outcome;
        }
        report.tasks[i].launches = valueOr<int>(tasks[i], "attempts", report.tasks[i].launches);
      }
      const Json peaks = event.value("agent_peaks", Json::object());
      if (peaks.is_object()) {
        for (const auto& [agent, figures] : peaks.items()) {
          auto read = protocol::agentMetricsFromJson(figures, nullptr);
          if (!read.empty()) report.agent_peaks[agent] = read;
        }
      }
    }
  }
  if (!started && number > 0) {
    return Error(fmt::format("{}: not a Dockhand event log (no \"log_start\" event)", source));
  }
  return jobs;
}

}  // namespace dockhand::driver
