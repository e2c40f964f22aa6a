// The Backend's task handlers (see backend.h): LaunchTask, KillTask and TaskThreadDump from the
// driver, the core queue (core_queue.h), and the runners' status updates on their way out.
#include <algorithm>
#include <chrono>
#include <optional>
#include <string>
#include <utility>

#include "core/backend.h"
#include "dockhand/base/log_format.h"
#include "dockhand/base/logging.h"
#include "dockhand/protocol/task_frames.h"

namespace dockhand::agent {

namespace proto = dockhand::protocol;

namespace {

double taskSeconds(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

std::shared_ptr<spdlog::logger> taskLog() { return logger("agent"); }

}  // namespace

void Backend::handleLaunchTask(const proto::Envelope& frame) {
  if (state_ != State::kRunning && state_ != State::kStopping) {
    exitExecutor(ExitCode::kProtocolViolation,
                 "received LaunchTask before the executor was registered",
                 /*notify_driver=*/true);
    return;
  }
  proto::TaskDescription task = proto::decodeBody<proto::LaunchTask>(frame.body).task;
  const TaskLogScope scope(task.task_id);
  proto::StatusUpdate update = statusOf(task);
  if (running_.count(task.task_id) != 0 || queue_.contains(task.task_id)) {
    replyError(frame, proto::error_code::kUnexpectedMessage,
               fmt::format("task {} is already running on this executor", task.task_id));
    return;
  }
  if (auto kill = early_kills_.find(task.task_id);
      kill != early_kills_.end() && kill->second.expires <= timers_.now()) {
    // Expired, but no heartbeat has pruned it yet: it no longer applies.
    early_kills_.erase(kill);
  }
  if (auto kill = early_kills_.find(task.task_id); kill != early_kills_.end()) {
    taskLog()->info("task {} was killed before it arrived ({}); not starting it", task.task_id,
                    kill->second.reason);
    update.state = proto::TaskState::kKilled;
    update.reason = kill->second.reason;
    early_kills_.erase(kill);
    last_task_finish_ = timers_.now();
    decommission_.onTaskEnded();
    sendStatus(update);
    return;
  }
  if (exiting_ || restarting_) {
    // A restart in place: the driver runs it elsewhere (or here, once resumed), no attempt
    // counted.
    update.state = restarting_ ? proto::TaskState::kLost : proto::TaskState::kKilled;
    update.reason = restarting_ ? "executor " + options_.executor_id + " is restarting in place"
                                : "executor is stopping";
    sendStatus(update);
    return;
  }
  if (decommission_.decommissioning()) {
    // LOST, not FAILED: the driver reschedules it elsewhere without counting a failure.
    taskLog()->info("refusing task {}: decommissioning", task.task_id);
    update.state = proto::TaskState::kLost;
    update.reason = fmt::format("executor {} is decommissioning", options_.executor_id);
    sendStatus(update);
    return;
  }
  taskLog()->debug("Got assigned task {} ({})", task.task_id, task.name);
  const TimePoint received = timers_.now();
  // Within the registered cores; behind the tasks already waiting (see backend.h).
  if (const int in_use = coresInUse(); !queue_.startsNow(task.cpus, in_use)) {
    taskLog()->debug("task {} waits for cores: {} of {} in use, {} task(s) waiting before it",
                     task.task_id, in_use, queue_.cores(), queue_.size());
    queue_.push(std::move(task), received);
    return;
  }
  startTask(task, received);
}

proto::StatusUpdate Backend::statusOf(const proto::TaskDescription& task) const {
  proto::StatusUpdate update;
  update.executor_id = options_.executor_id;
  update.task_id = task.task_id;
  update.cpus = task.cpus;
  update.resources = task.resources;
  return update;
}

void Backend::startTask(const proto::TaskDescription& task, TimePoint received) {
  running_.emplace(task.task_id, RunningTask{.cpus = task.cpus,
                                             .resources = task.resources,
                                             .received = received,
                                             .started = timers_.now()});
  metrics_.started.inc();
  if (auto launched = executor_.launch(task); !launched) {
    running_.erase(task.task_id);
    metrics_.duration.observe(taskSeconds(timers_.now() - received));
    taskLog()->warn("task {} could not start: {}", task.task_id, launched.error().message);
    proto::StatusUpdate update = statusOf(task);
    update.state = proto::TaskState::kFailed;
    update.reason = launched.error().message;
    last_task_finish_ = timers_.now();
    decommission_.onTaskEnded();
    sendStatus(update);
  }
}

void Backend::startWaiting() {
  // On exit and on decommission the waiting tasks were ended (endWaiting) and none are added.
  if (exiting_ || decommission_.decommissioning()) return;
  while (auto next = queue_.takeNextThatFits(coresInUse())) {
    const TaskLogScope scope(next->task.task_id);
    startTask(next->task, next->received);
  }
}

void Backend::endUnstarted(const proto::TaskDescription& task, proto::TaskState state,
                           std::string reason) {
  proto::StatusUpdate update = statusOf(task);
  update.state = state;
  update.reason = std::move(reason);
  last_task_finish_ = timers_.now();
  sendStatus(update);
}

void Backend::endWaiting(proto::TaskState state, const std::string& reason) {
  if (queue_.empty()) return;
  taskLog()->info("{} task(s) waiting for cores end {}: {}", queue_.size(), proto::toString(state),
                  reason);
  for (const auto& w : queue_.takeAll()) endUnstarted(w.task, state, reason);
}

void Backend::decommissionBegan() {
  // LOST, as a LaunchTask that arrives now: the driver runs them elsewhere, no failure counted.
  endWaiting(proto::TaskState::kLost,
             fmt::format("executor {} is decommissioning", options_.executor_id));
}

void Backend::handleKillTask(const proto::Envelope& frame) {
  if (state_ != State::kRunning && state_ != State::kStopping) {
    exitExecutor(ExitCode::kProtocolViolation,
                 "received KillTask before the executor was registered",
                 /*notify_driver=*/true);
    return;
  }
  auto kill = proto::decodeBody<proto::KillTask>(frame.body);
  const TaskLogScope scope(kill.task_id);
  std::string reason = kill.reason.empty() ? "killed by the driver" : kill.reason;
  if (auto waiting = queue_.take(kill.task_id)) {
    taskLog()->info("task {} killed before it started ({})", kill.task_id, reason);
    endUnstarted(waiting->task, proto::TaskState::kKilled, std::move(reason));
    startWaiting();  // the next in line may fit where this one did not
    return;
  }
  if (running_.count(kill.task_id) != 0) {
    if (!executor_.kill(kill.task_id, kill.interrupt, reason)) {
      taskLog()->debug("kill of task {}: it already ended", kill.task_id);
    }
    return;
  }
  // The kill overtook its launch (or the task already ended): remember it, so that a launch
  // that still arrives is stopped before it starts.
  rememberKill(kill.task_id, reason);
}

void Backend::rememberKill(std::uint64_t task_id, const std::string& reason) {
  if (early_kills_.size() >= options_.max_remembered_kills) pruneEarlyKills();
  if (early_kills_.size() >= options_.max_remembered_kills) {
    // Still full of live entries: drop the one closest to expiry.
    auto oldest = std::min_element(
        early_kills_.begin(), early_kills_.end(),
        [](const auto& a, const auto& b) { return a.second.expires < b.second.expires; });
    taskLog()->warn("forgetting the kill of task {}: more than {} kills are remembered",
                    oldest->first, options_.max_remembered_kills);
    early_kills_.erase(oldest);
  }
  early_kills_[task_id] = EarlyKill{reason, timers_.now() + options_.kill_memory};
}

void Backend::pruneEarlyKills() {
  TimePoint now = timers_.now();
  for (auto it = early_kills_.begin(); it != early_kills_.end();) {
    it = it->second.expires <= now ? early_kills_.erase(it) : std::next(it);
  }
}

void Backend::handleThreadDump(const proto::Envelope& frame) {
  auto ask = proto::decodeBody<proto::TaskThreadDump>(frame.body);
  if (state_ != State::kRunning && state_ != State::kStopping) {
    replyError(frame, proto::error_code::kNotRegistered, "the executor is not registered yet");
    return;
  }
  if (queue_.contains(ask.task_id)) {
    replyError(
        frame, proto::error_code::kUnknownTask,
        fmt::format("task {} has not started: it waits for cores on this executor", ask.task_id));
    return;
  }
  std::optional<Json> dump =
      running_.count(ask.task_id) != 0 ? executor_.threadDump(ask.task_id) : std::nullopt;
  if (!dump) {
    replyError(frame, proto::error_code::kUnknownTask,
               fmt::format("task {} is not running on this executor", ask.task_id));
    return;
  }
  if (frame.id != 0) link_.send(proto::makeReply(frame.id, std::move(*dump)));
}

// ---- Task status ---------------------------------------------------------------------------

void Backend::onTaskStatus(const TaskStatusEvent& status) {
  const TaskLogScope scope(status.task_id);
  auto it = running_.find(status.task_id);
  if (it == running_.end()) {
    taskLog()->warn("status {} for unknown task {} ignored", proto::toString(status.state),
                    status.task_id);
    return;
  }
  if (orphaned_.count(status.task_id) != 0) {
    if (proto::isTerminal(status.state)) {
      taskLog()->info("task {} of the refused session ended ({}); not reported", status.task_id,
                      proto::toString(status.state));
      orphaned_.erase(status.task_id);
      running_.erase(it);
    }
    return;
  }
  if (status.state == proto::TaskState::kRunning) {
    if (!it->second.reported_running) {
      it->second.reported_running = true;
      metrics_.launch_latency.observe(taskSeconds(timers_.now() - it->second.received));
    }
    if (options_.hold_running) {
      held_running_.push_back({status.task_id, timers_.now() + options_.running_hold});
      return;
    }
  } else if (auto held =
                 std::find_if(held_running_.begin(), held_running_.end(),
                              [&](const HeldRunning& h) { return h.task_id == status.task_id; });
             held != held_running_.end()) {
    // It ended before its RUNNING left: the final status says it all (protocol.md 7.2).
    held_running_.erase(held);
    metrics_.running_skipped.inc();
  }
  proto::StatusUpdate update = statusUpdate(status, it->second);
  if (proto::isTerminal(status.state)) {
    const TimePoint now = timers_.now();
    metrics_.duration.observe(taskSeconds(now - it->second.received));
    update.metrics = measured(status, it->second, now);
    running_.erase(it);
    last_task_finish_ = timers_.now();
    decommission_.onTaskEnded();
  }
  if (!status.blocks.empty()) {
    // Before the status: the driver must know the blocks when it learns the task finished.
    proto::UpdateBlockInfo info;
    info.executor_id = options_.executor_id;
    info.added = status.blocks;
    sendInOrder(proto::makeMessage(info), status.task_id);
  }
  sendStatus(update);
  if (restarting_ && !exiting_ && running_.empty()) {
    // A restart in place waited for the tasks that cannot outlive the program: they ended.
    exitExecutor(ExitCode::kRestartInPlace, restart_reason_ + ": restart in place",
                 /*notify_driver=*/false);
    return;
  }
  if (proto::isTerminal(status.state) && !queue_.empty()) {
    // Statuses leave with whatever else the core thread sends before its event loop is idle
    // (the idle hook flushes the link, at the latest after EventLoop::kMaxEventsBetweenIdle
    // closures), so that under a stream of short tasks they share writes. But unless more than
    // twice the cores' worth of tasks wait here, the driver hears of the freed core before the
    // next task's launch work holds the status back: the tasks it sends ahead meanwhile are what
    // keeps a core from idling after the next ends (with fewer waiting, leaving the status to
    // the idle flush made `--launch-ahead 2` slower).
    if (queue_.size() <= 2 * static_cast<std::size_t>(std::max(options_.cores, 1))) {
      link_.flush();
    }
    startWaiting();
  }
}

proto::TaskMetrics Backend::measured(const TaskStatusEvent& status, const RunningTask& task,
                                     TimePoint now) {
  proto::TaskMetrics figures = status.metrics;
  if (task.started) {
    figures.run_time_ms = static_cast<std::uint64_t>(std::max<std::int64_t>(
        0, std::chrono::duration_cast<std::chrono::milliseconds>(now - *task.started).count()));
  }
  if (!status.blocks.empty()) {
    std::uint64_t bytes = 0;
    for (const auto& block : status.blocks) bytes += block.size;
    figures.output_blocks = status.blocks.size();
    figures.output_bytes = bytes;
  }
  if (figures.cpu_time_ms) {
    metrics_.cpu_time.observe(static_cast<double>(*figures.cpu_time_ms) / 1000.0);
  }
  if (figures.peak_rss_bytes) {
    metrics_.peak_rss.observe(static_cast<double>(*figures.peak_rss_bytes));
    ended_peak_rss_ = std::max(ended_peak_rss_, *figures.peak_rss_bytes);
  }
  return figures;
}

void Backend::sendHeldStatuses() {
  const TimePoint now = timers_.now();
  auto waiting = held_running_.begin();  // the first not yet due: held in due order
  for (; waiting != held_running_.end() && waiting->due <= now; ++waiting) {
    auto it = running_.find(waiting->task_id);
    if (it == running_.end()) continue;
    TaskStatusEvent running;
    running.task_id = waiting->task_id;
    running.state = proto::TaskState::kRunning;
    sendStatus(statusUpdate(running, it->second));
  }
  held_running_.erase(held_running_.begin(), waiting);
  if (held_running_.empty() || held_running_timer_) return;
  // No wake-up while none waits; the idle hook that follows the timer flushes the link.
  held_running_timer_ =
      timers_.schedule(std::chrono::ceil<Millis>(held_running_.front().due - now), [this] {
        held_running_timer_.reset();
        sendHeldStatuses();
      });
}

proto::StatusUpdate Backend::statusUpdate(const TaskStatusEvent& status,
                                          const RunningTask& task) const {
  proto::StatusUpdate update;
  update.executor_id = options_.executor_id;
  update.task_id = status.task_id;
  update.state = status.state;
  update.result = status.result;
  update.reason = status.reason;
  if (restarting_ && status.state == proto::TaskState::kKilled) {
    // Stopped by a restart in place: the driver runs it again, no attempt counted.
    update.state = proto::TaskState::kLost;
    update.reason = "executor " + options_.executor_id +
                    " restarted in place; its running tasks do not survive a restart";
  }
  update.exit_code = status.exit_code;
  update.signal = status.signal;
  update.stderr_tail = status.stderr_tail;
  update.fetch_failed = status.fetch_failed;
  update.cpus = task.cpus;
  update.resources = task.resources;
  if (!task_log_url_.empty()) {
    for (const char* stream : {"stdout", "stderr"}) {
      update.log_urls[stream] = task_log_url_.expand(status.task_id, stream);
    }
  }
  return update;
}

void Backend::sendStatus(const proto::StatusUpdate& update) {
  const bool final_status = proto::isTerminal(update.state);
  if (final_status) metrics_.ended[static_cast<std::size_t>(update.state)]->inc();
  // Written straight to text (task_frames.h), not through a JSON tree: every task sends one
  // or two, on the core thread.
  Outgoing out;
  out.frame.type = std::string(proto::specOf(proto::StatusUpdate::kType).name);
  out.task_id = update.task_id;
  out.final_status = final_status;
  out.encoded = proto::encodeStatusUpdate(update);
  sendInOrder(std::move(out));
}

}  // namespace dockhand::agent
