#include "dockhand/driver/scheduler.h"

#include <algorithm>
#include <functional>
#include <stdexcept>

#include <fmt/format.h>

namespace dockhand::driver {

using protocol::TaskState;

namespace {
// A task that the agents keep losing is failed after this many relaunches without a
// counted failure, so that a broken agent cannot keep a job alive forever.
constexpr int kMaxRelaunchesAfterLoss = 100;
}  // namespace

DecommissionProgress parseDecommissionProgress(const std::string& agent_id, const Json& report) {
  return {protocol::readDecommissionProgress(report).value_or(protocol::DecommissionProgress{}),
          agent_id};
}

Scheduler::Scheduler(SchedulerOptions options) : options_(options) {}

// ---- agents -------------------------------------------------------------------------------

Result<void> Scheduler::registerAgent(const protocol::RegisterExecutor& reg, TimePoint now,
                                      Actions& out) {
  now_ = now;
  if (auto it = agents_.find(reg.executor_id); it != agents_.end()) {
    return Error(fmt::format("executor id '{}' is already registered (host {}); pick another "
                             "--executor-id or stop the other agent",
                             reg.executor_id, it->second.host),
                 std::string(protocol::error_code::kDuplicateExecutor));
  }
  if (reg.cores < 1) {
    return Error(fmt::format("executor '{}' offers {} cores; at least 1 is needed", reg.executor_id,
                             reg.cores),
                 std::string(protocol::error_code::kRegistrationRefused));
  }
  AgentInfo agent;
  agent.id = reg.executor_id;
  agent.host = reg.hostname;
  agent.cores = reg.cores;
  agent.waits_for_cores = reg.waits_for_cores;
  agent.ahead = aheadFor(agent);
  agent.free_cores = reg.cores + agent.ahead;
  agent.block_url = reg.block_url;
  agent.log_urls = reg.log_urls;
  agent.resumes = reg.resumes;
  agent.registered_at = now;
  agent.last_seen = now;
  for (const auto& [name, info] : reg.resources) {
    std::vector<std::string> unique;
    for (const auto& address : info.addresses) {
      if (std::find(unique.begin(), unique.end(), address) == unique.end()) {
        unique.push_back(address);
      }
    }
    agent.free_units[name] = std::vector<std::int64_t>(unique.size(), kResourceUnits);
    agent.resources[name] = std::move(unique);
  }
  agents_.emplace(agent.id, std::move(agent));
  (void)out;  // it takes tasks once launched
  return {};
}

bool Scheduler::agentLaunched(const std::string& agent_id, TimePoint now, Actions& out) {
  now_ = now;
  auto it = agents_.find(agent_id);
  if (it == agents_.end()) return false;
  it->second.last_seen = now;
  if (it->second.state == AgentState::kRegistered) {
    setAgentState(it->second, AgentState::kActive);
    if (takesTasks(it->second)) {
      total_free_cores_ += it->second.free_cores;
      indexAgent(it->second);
    }
    schedule(now, out);
  }
  return true;
}

bool Scheduler::touch(const std::string& agent_id, TimePoint now) {
  now_ = now;
  auto it = agents_.find(agent_id);
  if (it == agents_.end()) return false;
  it->second.last_seen = now;
  return true;
}

bool Scheduler::removeAgent(const std::string& agent_id, const std::string& reason, Actions& out) {
  auto it = agents_.find(agent_id);
  if (it == agents_.end()) return false;
  if (takesTasks(it->second)) total_free_cores_ -= it->second.free_cores;
  unindexAgent(it->second);
  agents_.erase(it);
  const std::vector<std::string> gone = blocks_.dropHolder(agent_id);

  // Its tasks are lost with it: run them elsewhere without counting an attempt.
  std::vector<std::size_t> lost;
  for (auto run = running_.begin(); run != running_.end();) {
    if (run->second.agent_id != agent_id) {
      ++run;
      continue;
    }
    if (run->second.job_seq == job_seq_ && !run->second.kill_requested) {
      lost.push_back(run->second.index);
    }
    forgetRun(run->first, run->second);
    run = running_.erase(run);
  }
  // Relaunch in the original order, ahead of tasks that never ran: each goes to the front of the
  // queue, the last first.
  std::sort(lost.begin(), lost.end(), std::greater<>());
  for (const auto index : lost) {
    TaskRecord& t = tasks_[index];
    t.reason = fmt::format("agent {} lost: {}", agent_id, reason);
    if (job_state_ != JobState::kRunning) continue;
    if (t.launches - t.failures > kMaxRelaunchesAfterLoss) {
      setOutcome(t, TaskOutcome::kFailed);
      failJob(fmt::format("task '{}' was lost {} times (last: {})", t.spec.name,
                          t.launches - t.failures, t.reason),
              out);
      return true;
    }
    sendBack(t, "LOST");
    pending_.push_front(index);
    ++relaunches_after_loss_;
  }
  onBlocksLost(gone, fmt::format("agent {} left: {}", agent_id, reason));
  schedule(now_, out);
  return true;
}

bool Scheduler::decommissionAgent(const std::string& agent_id) {
  auto it = agents_.find(agent_id);
  if (it == agents_.end()) return false;
  if (takesTasks(it->second)) total_free_cores_ -= it->second.free_cores;
  unindexAgent(it->second);
  setAgentState(it->second, AgentState::kDecommissioning);
  return true;
}

namespace {

void raisePeak(std::optional<std::uint64_t>& peak, std::optional<std::uint64_t> value) {
  if (value && (!peak || *value > *peak)) peak = value;
}

}  // namespace

void Scheduler::noteAgentMetrics(const std::string& agent_id,
                                 const protocol::AgentMetrics& metrics) {
  auto it = agents_.find(agent_id);
  if (it == agents_.end()) return;
  it->second.metrics = metrics;
  if (job_state_ == JobState::kRunning) raiseJobPeaks(agent_id, metrics);
}

void Scheduler::raiseJobPeaks(const std::string& agent_id, const protocol::AgentMetrics& beat) {
  auto [it, added] = job_agent_peaks_.try_emplace(agent_id);
  protocol::AgentMetrics& peaks = it->second;
  raisePeak(peaks.rss_bytes, beat.rss_bytes);
  raisePeak(peaks.tasks_rss_bytes, beat.tasks_rss_bytes);
  raisePeak(peaks.tasks_rss_bytes, beat.peak_tasks_rss_bytes);
  raisePeak(peaks.blocks, beat.blocks);
  raisePeak(peaks.block_bytes, beat.block_bytes);
  if (added && peaks.empty()) job_agent_peaks_.erase(it);  // a beat that carried nothing
}

bool Scheduler::noteDecommissionProgress(const std::string& agent_id, const Json& report) {
  auto it = agents_.find(agent_id);
  if (it == agents_.end()) return false;
  const std::string before = parseDecommissionProgress(agent_id, it->second.decommission).state;
  const bool had = !it->second.decommission.is_null();
  it->second.decommission = report;
  const std::string after = parseDecommissionProgress(agent_id, report).state;
  return had != !report.is_null() || before != after;
}

std::vector<protocol::Peer> Scheduler::peersFor(const std::string& asker) {
  std::vector<const std::pair<const std::string, AgentInfo>*> eligible;
  for (const auto& entry : agents_) {
    const AgentInfo& agent = entry.second;
    if (entry.first == asker || agent.block_url.empty() ||
        agent.state == AgentState::kDecommissioning || agent.disconnected_since) {
      continue;
    }
    eligible.push_back(&entry);
  }
  const std::size_t offered = std::min(eligible.size(), options_.max_peers_offered);
  std::vector<protocol::Peer> peers;
  peers.reserve(offered);
  // All of them, in id order, when they fit; else the next slice.
  const std::size_t start = offered == eligible.size() ? 0 : peer_cursor_ % eligible.size();
  for (std::size_t i = 0; i < offered; ++i) {
    const auto& [id, agent] = *eligible[(start + i) % eligible.size()];
    peers.push_back(protocol::Peer{.executor_id = id, .block_url = agent.block_url});
  }
  peer_cursor_ += offered;
  return peers;
}

const AgentInfo* Scheduler::agent(const std::string& id) const {
  auto it = agents_.find(id);
  return it == agents_.end() ? nullptr : &it->second;
}

// ---- the job ------------------------------------------------------------------------------

int Scheduler::maxAttempts() const {
  return job_.max_attempts > 0 ? job_.max_attempts : options_.default_max_attempts;
}

void Scheduler::submit(JobSpec job, TimePoint now, Actions& out) {
  if (job_state_ == JobState::kRunning) {
    throw std::logic_error("a job is already running; wait for it to end");
  }
  now_ = now;
  job_ = std::move(job);
  ++job_seq_;
  setJobState(JobState::kRunning);
  failure_reason_.clear();
  tasks_.clear();
  job_agent_peaks_.clear();
  pending_.clear();
  finished_ = 0;
  retries_ = 0;
  relaunches_after_loss_ = 0;
  reruns_for_lost_blocks_ = 0;
  fetch_failures_ = 0;
  recalled_ = 0;
  resetAhead();
  producer_.clear();
  consumers_.clear();
  // Each task's spec moves into its record: a job's specs are held once (job() keeps the rest).
  tasks_.reserve(job_.tasks.size());
  for (std::size_t i = 0; i < job_.tasks.size(); ++i) {
    TaskRecord record;
    record.spec = std::move(job_.tasks[i]);
    record.pending_since = now;
    for (const auto& id : record.spec.outputs) producer_[id] = i;
    for (const auto& id : record.spec.inputs) consumers_[id].push_back(i);
    tasks_.push_back(std::move(record));
    pending_.push_back(i);
  }
  job_.tasks = {};
  if (tasks_.empty()) {
    setJobState(JobState::kSucceeded);
    return;
  }
  schedule(now, out);
}

void Scheduler::recordStatus(TaskRecord& record, protocol::StatusUpdate& update) {
  record.result = std::move(update.result);
  record.reason = std::move(update.reason);
  record.exit_code = update.exit_code;
  record.signal = update.signal;
  record.stderr_tail = std::move(update.stderr_tail);
  record.log_urls = std::move(update.log_urls);
  record.metrics = update.metrics;
}

void Scheduler::onStatusUpdate(const std::string& agent_id, protocol::StatusUpdate update,
                               TimePoint now, Actions& out) {
  now_ = now;
  auto it = running_.find(update.task_id);
  if (it == running_.end() || it->second.agent_id != agent_id) {
    ++stray_updates_;
    return;
  }
  if (update.state == TaskState::kRunning) {
    waiting_ahead_.erase(update.task_id);  // it started: nothing to recall
    return;
  }

  RunningTask run = std::move(it->second);
  forgetRun(update.task_id, run);
  running_.erase(it);
  release(run);
  if (auto agent = agents_.find(agent_id); agent != agents_.end()) {
    ++(update.state == TaskState::kFinished ? agent->second.tasks_finished
                                            : agent->second.tasks_failed);
  }
  if (run.job_seq != job_seq_) {
    schedule(now, out);
    return;
  }
  noteRunTime(update.metrics);
  TaskRecord& t = tasks_[run.index];
  recordStatus(t, update);
  // The agent's tasks held at least what this one did: a task that ends between two heartbeats
  // (or after the job's last) still counts to its agent's peak.
  if (update.metrics.peak_rss_bytes) {
    protocol::AgentMetrics ended;
    ended.peak_tasks_rss_bytes = update.metrics.peak_rss_bytes;
    raiseJobPeaks(agent_id, ended);
  }
  t.duration = std::chrono::duration_cast<Millis>(now - t.launched_at);

  if (job_state_ != JobState::kRunning) {
    // The job is over; this is a task it killed (or one that finished before the kill).
    if (update.state == TaskState::kFinished) setOutcome(t, TaskOutcome::kFinished);
    return;
  }

  if (run.recalled && update.state == TaskState::kKilled) {
    // Recalled before it started (recallWaiting): it runs again, no attempt counted.
    sendBack(t, "KILLED");
    pending_.push_front(run.index);
    schedule(now, out);
    return;
  }
  if (update.state == TaskState::kFailed && update.fetch_failed) {
    if (onFetchFailed(run.index, agent_id, *update.fetch_failed, out)) schedule(now, out);
    return;
  }
  switch (update.state) {
    case TaskState::kFinished:
      setOutcome(t, TaskOutcome::kFinished);
      if (++finished_ == tasks_.size()) setJobState(JobState::kSucceeded);
      break;
    case TaskState::kFailed:
    case TaskState::kKilled: {
      ++t.failures;
      if (t.failures >= maxAttempts()) {
        setOutcome(t, TaskOutcome::kFailed);
        std::string why =
            t.reason.empty() ? std::string(protocol::toString(update.state)) : t.reason;
        failJob(fmt::format("task '{}' failed {} time(s), the limit (last on {}: {})", t.spec.name,
                            t.failures, agent_id, why),
                out);
        return;
      }
      sendBack(t, protocol::toString(update.state));
      pending_.push_front(run.index);
      ++retries_;
      break;
    }
    case TaskState::kLost:
      if (t.launches - t.failures > kMaxRelaunchesAfterLoss) {
        setOutcome(t, TaskOutcome::kFailed);
        failJob(fmt::format("task '{}' was lost {} times", t.spec.name, t.launches - t.failures),
                out);
        return;
      }
      sendBack(t, "LOST");
      pending_.push_front(run.index);
      ++relaunches_after_loss_;
      break;
    case TaskState::kRunning:
      break;
  }
  schedule(now, out);
}

std::size_t Scheduler::killsUnanswered() const {
  return static_cast<std::size_t>(std::count_if(
      running_.begin(), running_.end(),
      [&](const auto& r) { return r.second.job_seq == job_seq_ && r.second.kill_requested; }));
}

bool Scheduler::isRunningOn(std::uint64_t task_id, const std::string& agent_id) const {
  auto it = running_.find(task_id);
  return it != running_.end() && it->second.agent_id == agent_id;
}

std::optional<std::size_t> Scheduler::runningIndex(std::uint64_t task_id) const {
  auto it = running_.find(task_id);
  if (it == running_.end() || it->second.job_seq != job_seq_) return std::nullopt;
  return it->second.index;
}

void Scheduler::cancel(const std::string& reason, Actions& out) {
  if (job_state_ == JobState::kRunning) failJob(reason, out);
}

void Scheduler::failJob(const std::string& reason, Actions& out) {
  setJobState(JobState::kFailed);
  failure_reason_ = reason;
  for (std::size_t index : pending_) setOutcome(tasks_[index], TaskOutcome::kCancelled);
  pending_.clear();
  for (auto& [task_id, run] : running_) {
    if (run.job_seq != job_seq_ || run.kill_requested) continue;
    run.kill_requested = true;
    run.kill_reason = "job failed: " + reason;
    setOutcome(tasks_[run.index], TaskOutcome::kKilled);
    Action kill;
    kill.kind = Action::Kind::kKill;
    kill.agent_id = run.agent_id;
    kill.task_id = task_id;
    kill.reason = run.kill_reason;
    out.push_back(std::move(kill));
  }
}

Progress Scheduler::progress() const {
  Progress p;
  p.total = tasks_.size();
  for (const auto& t : tasks_) {
    switch (t.outcome) {
      case TaskOutcome::kPending:
        ++p.pending;
        break;
      case TaskOutcome::kRunning:
        ++p.running;
        break;
      case TaskOutcome::kFinished:
        ++p.finished;
        break;
      case TaskOutcome::kFailed:
        ++p.failed;
        break;
      case TaskOutcome::kKilled:
      case TaskOutcome::kCancelled:
        break;
    }
  }
  p.retries = retries_;
  p.relaunches_after_loss = relaunches_after_loss_;
  p.recalled = recalled_;
  p.reruns_for_lost_blocks = reruns_for_lost_blocks_;
  p.fetch_failures = fetch_failures_;
  if (job_state_ == JobState::kRunning) {
    for (std::size_t index : pending_) {
      if (!inputsReady(tasks_[index].spec)) ++p.waiting_for_inputs;
    }
  }
  for (const auto& [id, agent] : agents_) {
    if (agent.state == AgentState::kDecommissioning) {
      p.decommissions.push_back(parseDecommissionProgress(id, agent.decommission));
    }
  }
  return p;
}

std::optional<std::string> Scheduler::unschedulableReason() const {
  if (agents_.empty() || job_state_ != JobState::kRunning) return std::nullopt;
  for (std::size_t index : pending_) {
    const TaskSpec& spec = tasks_[index].spec;
    bool possible = false;
    for (const auto& [id, agent] : agents_) {
      bool enough = agent.cores >= spec.cpus;
      for (const auto& [name, count] : spec.resources) {
        auto res = agent.resources.find(name);
        if (res == agent.resources.end() ||
            static_cast<int>(res->second.size()) < resourceAddressCount(count)) {
          enough = false;
        }
      }
      if (enough) {
        possible = true;
        break;
      }
    }
    if (!possible) {
      std::string wants = fmt::format("{} cpus", spec.cpus);
      for (const auto& [name, count] : spec.resources) wants += fmt::format(", {} {}", count, name);
      return fmt::format("task '{}' needs {}, more than any of the {} registered agent(s) has",
                         spec.name, wants, agents_.size());
    }
  }
  return std::nullopt;
}

}  // namespace dockhand::driver
