// The Backend's Reconnecting state (backend.h, protocol.md 6.6): a registered agent whose
// connection went keeps its tasks and blocks, connects again with back-off, and resumes with
// ResumeExecutor. Every final status reaches the driver once: those queued meanwhile leave
// after the resume, those written just before the connection went (and perhaps lost with it)
// are sent again when the driver still counts their task as running, and a task the driver
// counts as running that never arrived here is reported LOST.
//
// Also the restart in place (a new program in the same process): the running tasks handed over
// to it, taken back there and listed in its ResumeExecutor; and the in-order sends those rest
// on (the outbox while nothing can be sent, the final statuses kept as text once written).
#include <algorithm>
#include <iterator>
#include <unordered_set>

#include "core/backend.h"
#include "dockhand/base/logging.h"

namespace dockhand::agent {

namespace proto = dockhand::protocol;

void Backend::connectionLost(const std::string& why) {
  if (!resumable() || state_ != State::kRunning) {
    exitExecutor(ExitCode::kDriverLost, why, /*notify_driver=*/false);
    return;
  }
  logger("agent")->warn("{}; {} task(s) go on, reconnecting for up to {} ms", why, running_.size(),
                        options_.reconnect_timeout.count());
  lost_because_ = why;
  setState(State::kReconnecting);
  if (heartbeat_timer_) {
    timers_.cancel(*heartbeat_timer_);
    heartbeat_timer_.reset();
  }
  reconnect_deadline_ = timers_.now() + options_.reconnect_timeout;
  reconnect_wait_ = options_.reconnect_delay;
  scheduleReconnect();
}

void Backend::scheduleReconnect() {
  timers_.schedule(reconnect_wait_, [this] {
    if (state_ == State::kReconnecting && !exiting_) connect();
  });
  reconnect_wait_ = std::min(reconnect_wait_ * 2, options_.reconnect_max_delay);
}

void Backend::onReconnectFailed(const std::string& reason, bool retryable) {
  if (!retryable || timers_.now() + reconnect_wait_ > reconnect_deadline_) {
    exitExecutor(
        ExitCode::kDriverLost,
        fmt::format("could not get the connection to driver {} back within {} ms ({}): {}",
                    options_.driver_url, options_.reconnect_timeout.count(), lost_because_, reason),
        /*notify_driver=*/false);
    return;
  }
  logger("agent")->info("reconnecting to driver {}: {}; next try in {} ms", options_.driver_url,
                        reason, reconnect_wait_.count());
  scheduleReconnect();
}

std::vector<std::uint64_t> Backend::tasksHere() const {
  std::vector<std::uint64_t> ids;
  ids.reserve(running_.size() + queue_.size());
  for (const auto& [task_id, task] : running_) ids.push_back(task_id);
  queue_.appendIds(ids);
  for (const auto& queued : outbox_) {
    if (queued.final_status) ids.push_back(queued.task_id);
  }
  std::sort(ids.begin(), ids.end());
  return ids;
}

void Backend::resume() {
  proto::ResumeExecutor ask;
  ask.executor_id = options_.executor_id;
  ask.running = tasksHere();
  if (options_.held_blocks) ask.blocks = options_.held_blocks();
  link_.ask(proto::makeMessage(ask), options_.ask_timeout, [this](AskResult result) {
    if (state_ != State::kReconnecting || exiting_) return;
    if (result.ok) {
      try {
        onResumed(proto::decodeBody<proto::ResumeAccepted>(result.body));
      } catch (const proto::BodyError& e) {
        exitExecutor(
            ExitCode::kDriverLost,
            fmt::format("the driver answered ResumeExecutor with an invalid body: {}", e.what()),
            /*notify_driver=*/false);
      }
      return;
    }
    if (result.error.code == proto::error_code::kDisconnected) return;  // onDriverDisconnected
    if (result.error.code == proto::error_code::kTimeout) {
      link_.close();
      onReconnectFailed("the driver did not answer ResumeExecutor in time", true);
      return;
    }
    // not_resumable, or unknown_type from a driver that cannot take agents back.
    exitExecutor(
        ExitCode::kDriverLost,
        fmt::format("driver {} would not take executor {} back: {} ({})", options_.driver_url,
                    options_.executor_id, result.error.message, result.error.code),
        /*notify_driver=*/false);
  });
}

void Backend::onResumed(const proto::ResumeAccepted& accepted) {
  ++resumes_;
  last_driver_message_ = timers_.now();
  const std::unordered_set<std::uint64_t> counted(accepted.tasks.begin(), accepted.tasks.end());
  std::unordered_set<std::uint64_t> known;
  for (const auto& queued : outbox_) {
    if (queued.final_status) known.insert(queued.task_id);
  }
  // Written before the connection went, and the driver never saw them: ahead of the outbox,
  // in the order they were first sent.
  std::deque<Outgoing> again;
  for (auto& sent : recent_ends_) {
    if (counted.count(sent.task_id) > 0 && known.insert(sent.task_id).second) {
      again.push_back(std::move(sent));
    }
  }
  recent_ends_.clear();  // every other one reached the driver
  outbox_.insert(outbox_.begin(), std::make_move_iterator(again.begin()),
                 std::make_move_iterator(again.end()));
  std::vector<std::uint64_t> never_received;
  for (const auto task_id : accepted.tasks) {
    if (known.count(task_id) == 0 && running_.count(task_id) == 0 && !queue_.contains(task_id)) {
      never_received.push_back(task_id);
    }
  }
  setState(State::kRunning);
  logger("agent")->info(
      "resumed with driver {} as executor {} ({}): {} task(s) running here, {} final status(es) "
      "sent again, {} launch(es) never received reported LOST",
      options_.driver_url, options_.executor_id, lost_because_, running_.size() + queue_.size(),
      again.size(), never_received.size());
  for (const auto task_id : never_received) {
    proto::StatusUpdate lost;
    lost.executor_id = options_.executor_id;
    lost.task_id = task_id;
    lost.state = proto::TaskState::kLost;
    lost.reason =
        "its launch never reached executor " + options_.executor_id + " (lost with the connection)";
    sendStatus(lost);
  }
  flushOutbox();
  scheduleHeartbeat();
  if (decommission_after_resume_) {
    decommission_after_resume_ = false;
    decommission_.onSignal();
  }
}

void Backend::resumeAfterRestart() {
  if (options_.take_back_tasks) {
    for (auto& task : options_.take_back_tasks()) {
      RunningTask running;
      running.cpus = task.cpus;
      running.resources = std::move(task.resources);
      running.received = timers_.now();
      running.reported_running = true;  // by the previous program
      running_.emplace(task.task_id, std::move(running));
    }
  }
  proto::ResumeExecutor ask;
  ask.executor_id = options_.executor_id;
  ask.running = tasksHere();
  if (options_.held_blocks) ask.blocks = options_.held_blocks();
  logger("agent")->info(
      "resuming executor {} with driver {} after a restart: {} task(s) taken back, {} block(s) "
      "kept",
      options_.executor_id, options_.driver_url, ask.running.size(), ask.blocks.size());
  link_.ask(proto::makeMessage(ask), options_.ask_timeout, [this](AskResult result) {
    if (state_ != State::kRegistering || exiting_) return;
    if (result.ok) {
      try {
        onResumedAfterRestart(proto::decodeBody<proto::ResumeAccepted>(result.body));
      } catch (const proto::BodyError& e) {
        exitExecutor(
            ExitCode::kBootstrapFailed,
            fmt::format("the driver answered ResumeExecutor with an invalid body: {}", e.what()),
            /*notify_driver=*/false);
      }
      return;
    }
    if (result.error.code == proto::error_code::kTimeout ||
        result.error.code == proto::error_code::kDisconnected) {
      exitExecutor(ExitCode::kBootstrapFailed,
                   fmt::format("cannot resume with driver {}: {}", options_.driver_url,
                               result.error.message),
                   /*notify_driver=*/false);
      return;
    }
    // not_resumable (the grace window passed, or a new driver process), or unknown_type: the
    // driver already ran elsewhere what it had here. Register anew on a new connection (the
    // driver closes this one).
    logger("agent")->warn(
        "driver {} would not take executor {} back after the restart: {} ({}); "
        "registering anew",
        options_.driver_url, options_.executor_id, result.error.message, result.error.code);
    restart_resume_ = false;
    orphanTakenBack(result.error.message);
    if (options_.on_resume_refused) options_.on_resume_refused();
    link_.close();
    connect_attempts_ = 0;
    setState(State::kConnecting);
    connect();
  });
}

void Backend::onResumedAfterRestart(const proto::ResumeAccepted& accepted) {
  restart_resume_ = false;
  ++resumes_;
  last_driver_message_ = timers_.now();
  setState(State::kRunning);
  // Known here: taken back and running, or taken back and ended (its status waits in the
  // outbox).
  const std::vector<std::uint64_t> here = tasksHere();
  const std::unordered_set<std::uint64_t> known(here.begin(), here.end());
  const std::unordered_set<std::uint64_t> counted(accepted.tasks.begin(), accepted.tasks.end());
  std::vector<std::uint64_t> lost_ids;
  for (const auto task_id : accepted.tasks) {
    if (known.count(task_id) == 0) lost_ids.push_back(task_id);
  }
  std::vector<std::uint64_t> uncounted;
  for (const auto& [task_id, task] : running_) {
    if (counted.count(task_id) == 0) uncounted.push_back(task_id);
  }
  logger("agent")->info(
      "resumed as executor {} with driver {} after a restart: {} task(s) taken back run on, "
      "{} the driver counted here did not survive it and are reported LOST",
      options_.executor_id, options_.driver_url, running_.size() - uncounted.size(),
      lost_ids.size());
  for (const auto task_id : uncounted) {
    // The driver ran it elsewhere meanwhile (or never launched it here): not twice at once.
    orphaned_.insert(task_id);
    executor_.kill(task_id, /*interrupt=*/true, "the driver no longer counts it on this executor");
  }
  for (const auto task_id : lost_ids) {
    proto::StatusUpdate lost;
    lost.executor_id = options_.executor_id;
    lost.task_id = task_id;
    lost.state = proto::TaskState::kLost;
    lost.reason = "executor " + options_.executor_id +
                  " restarted (its previous process ended) and the task did not survive it";
    sendStatus(lost);
  }
  flushOutbox();
  scheduleHeartbeat();
}

void Backend::onRestartRequested(const std::string& reason) {
  if (exiting_ || restarting_) return;
  keeps_session_on_restart_ =
      resumable() && (state_ == State::kRunning || state_ == State::kReconnecting);
  logger("agent")->info("{}: restarting in place ({})", reason,
                        keeps_session_on_restart_
                            ? "the driver holds this executor meanwhile and it resumes"
                            : "not registered yet: it starts anew");
  restarting_ = true;
  restart_reason_ = reason;
  if (keeps_session_on_restart_ && options_.restart_wait.count() > 0) {
    // What can go on goes now; what cannot gets up to restart_wait to end by itself. The
    // driver's next launches are answered LOST meanwhile.
    endWaiting(proto::TaskState::kLost,
               "executor " + options_.executor_id + " is restarting in place");
    handOverTasks();
    if (!running_.empty()) {
      logger("agent")->info(
          "waiting up to {} ms for {} task(s) that cannot outlive the program to end "
          "(restart_wait_ms)",
          options_.restart_wait.count(), running_.size());
      restart_timer_ = timers_.schedule(options_.restart_wait, [this] {
        restart_timer_.reset();
        if (exiting_) return;
        logger("agent")->info("{} task(s) still running after {} ms: stopping them",
                              running_.size(), options_.restart_wait.count());
        exitExecutor(ExitCode::kRestartInPlace, restart_reason_ + ": restart in place",
                     /*notify_driver=*/false);
      });
      return;
    }
  }
  exitExecutor(ExitCode::kRestartInPlace, reason + ": restart in place", /*notify_driver=*/false);
}

void Backend::handOverTasks() {
  if (handed_over_ || !keeps_session_on_restart_ || !options_.on_handed_over) return;
  handed_over_ = true;
  if (running_.empty()) return;
  std::vector<HandedOverTask> handed = executor_.handOver();
  for (auto& task : handed) {
    auto it = running_.find(task.task_id);
    if (it == running_.end()) continue;
    task.cpus = it->second.cpus;
    task.resources = it->second.resources;
    running_.erase(it);
  }
  logger("agent")->info("{} running task(s) go on in the next program; {} cannot and are stopped",
                        handed.size(), running_.size());
  options_.on_handed_over(handed);
}

void Backend::orphanTakenBack(const std::string& why) {
  // Their statuses, and those already queued, belong to the refused session.
  std::erase_if(outbox_,
                [](const Outgoing& queued) { return queued.frame.type == "StatusUpdate"; });
  if (running_.empty()) return;
  logger("agent")->warn(
      "stopping the {} task(s) taken back: the driver would not resume their session ({})",
      running_.size(), why);
  for (const auto& [task_id, task] : running_) {
    orphaned_.insert(task_id);
    executor_.kill(task_id, /*interrupt=*/true, "the driver would not resume this executor");
  }
}

void Backend::rememberEnd(Outgoing sent) {
  if (recent_ends_.size() == kRecentEnds) recent_ends_.pop_front();
  proto::Envelope type_only;
  type_only.type = std::move(sent.frame.type);
  sent.frame = std::move(type_only);  // its text stands for it
  recent_ends_.push_back(std::move(sent));
}

// ---- In-order sends -------------------------------------------------------------------------

bool Backend::sendInOrder(proto::Envelope frame) { return sendInOrder(std::move(frame), 0); }

bool Backend::sendInOrder(proto::Envelope frame, std::uint64_t task_id, bool final_status) {
  return sendInOrder(Outgoing{std::move(frame), task_id, final_status});
}

bool Backend::sendInOrder(Outgoing out) {
  // Keep order: once something waits in the outbox, everything queues behind it. Nothing is
  // sent while Reconnecting until the driver has taken the agent back.
  if (outbox_.empty() && sendsNow() && link_.connected() && write(out)) return true;
  outbox_.push_back(std::move(out));
  if (outbox_.size() == 1) {
    logger("agent")->warn("cannot send status updates to the driver right now; queueing them");
  }
  return false;
}

bool Backend::write(Outgoing& out) {
  const bool remember = out.final_status && resumable();
  if (remember && out.encoded.empty()) out.encoded = proto::encodeEnvelope(out.frame);
  const bool sent =
      out.encoded.empty() ? link_.send(out.frame) : link_.sendEncoded(out.frame.type, out.encoded);
  if (sent && remember) rememberEnd(std::move(out));
  return sent;
}

void Backend::flushOutbox() {
  if (!sendsNow()) return;
  while (!outbox_.empty() && link_.connected()) {
    if (!write(outbox_.front())) return;
    outbox_.pop_front();
  }
}

}  // namespace dockhand::agent
