#include "core/decommission_flow.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "dockhand/base/logging.h"

namespace dockhand::agent {

namespace proto = dockhand::protocol;

std::string_view toString(DecommissionPhase phase) {
  switch (phase) {
    case DecommissionPhase::kInactive:
      return "inactive";
    case DecommissionPhase::kAskingDriver:
      return "asking-driver";
    case DecommissionPhase::kDecommissioning:
      return "decommissioning";
    case DecommissionPhase::kFinished:
      return "finished";
    case DecommissionPhase::kDeadlinePassed:
      return "deadline-passed";
  }
  return "unknown";
}

DecommissionFlow::DecommissionFlow(DecommissionOptions options, std::string executor_id,
                                   Millis ask_timeout, DriverLink& link, Timers& timers,
                                   Decommissioner* decommissioner, Host& host)
    : options_(options),
      executor_id_(std::move(executor_id)),
      ask_timeout_(ask_timeout),
      link_(link),
      timers_(timers),
      decommissioner_(decommissioner),
      host_(host) {}

bool DecommissionFlow::isLegalMove(Phase from, Phase to) {
  switch (from) {
    case Phase::kInactive:
      return to == Phase::kAskingDriver || to == Phase::kDecommissioning;
    case Phase::kAskingDriver:
      return to == Phase::kInactive || to == Phase::kDecommissioning;
    case Phase::kDecommissioning:
      return to == Phase::kFinished || to == Phase::kDeadlinePassed;
    case Phase::kFinished:
    case Phase::kDeadlinePassed:
      return false;
  }
  return false;
}

bool DecommissionFlow::moveTo(Phase next) {
  if (!isLegalMove(phase_, next)) {
    logger("agent")->error("illegal decommission transition {} -> {}", toString(phase_),
                           toString(next));
    return false;
  }
  logger("agent")->debug("decommission {} -> {}", toString(phase_), toString(next));
  phase_ = next;
  return true;
}

bool DecommissionFlow::decommissioning() const {
  return phase_ == Phase::kDecommissioning || phase_ == Phase::kFinished ||
         phase_ == Phase::kDeadlinePassed;
}

bool DecommissionFlow::migrationEnabled() const {
  return decommissioner_ != nullptr && decommissioner_->migrationEnabled();
}

void DecommissionFlow::onTaskEnded() { ++task_ends_; }

// ---- Triggers ------------------------------------------------------------------------------

void DecommissionFlow::onSignal() {
  if (!options_.enabled) {
    logger("agent")->warn(
        "received the decommission signal, but decommission is disabled on this agent "
        "(decommission.enabled is false); ignoring it");
    return;
  }
  if (phase_ != Phase::kInactive) {
    logger("agent")->warn("executor {} already started decommissioning; ignoring the signal",
                          executor_id_);
    return;
  }
  if (host_.stopping()) {
    logger("agent")->info("decommission signal ignored: the executor is stopping");
    return;
  }
  if (!host_.registered()) {
    logger("agent")->warn("decommission signal before executor {} registered; ignoring it",
                          executor_id_);
    return;
  }
  if (!moveTo(Phase::kAskingDriver)) return;
  logger("agent")->info(
      "decommission signal received: telling the driver that executor {} decommissions",
      executor_id_);
  link_.ask(proto::makeMessage(proto::ExecutorDecommissioning{.executor_id = executor_id_}),
            ask_timeout_, [this](const AskResult& result) { onDriverAnswer(result); });
}

void DecommissionFlow::onDriverAnswer(const AskResult& result) {
  // Not asking any more when the driver's own request started decommissioning meanwhile: the
  // answer then changes nothing (begin() below only logs that it started already).
  const bool asking = phase_ == Phase::kAskingDriver;
  if (host_.stopping()) {
    if (asking) moveTo(Phase::kInactive);
    return;
  }
  if (!result.ok) {
    logger("agent")->error(
        "cannot tell the driver that executor {} starts decommissioning ({}); not "
        "decommissioning",
        executor_id_, result.error.message);
    if (asking) moveTo(Phase::kInactive);
    return;
  }
  host_.driverAnswered();
  bool accepted = true;
  if (result.body.is_object()) {
    auto it = result.body.find("accepted");
    if (it != result.body.end() && it->is_boolean()) accepted = it->get<bool>();
  }
  if (!accepted) {
    logger("agent")->warn("the driver did not accept the decommissioning of executor {}",
                          executor_id_);
    if (asking) moveTo(Phase::kInactive);
    return;
  }
  begin("decommission signal");
}

void DecommissionFlow::onDriverRequest(const std::string& reason) { begin(reason); }

void DecommissionFlow::begin(const std::string& reason) {
  if (!options_.enabled) {
    logger("agent")->warn(
        "received a decommission request ({}), but decommission is disabled; ignoring it", reason);
    return;
  }
  if (decommissioning()) {
    logger("agent")->warn("executor {} already started decommissioning; ignoring ({})",
                          executor_id_, reason);
    return;
  }
  if (host_.stopping()) {
    logger("agent")->info("decommission request ignored: the executor is stopping");
    return;
  }
  if (!host_.registered()) {
    logger("agent")->warn("decommission request before executor {} registered; ignoring it",
                          executor_id_);
    return;
  }
  if (!moveTo(Phase::kDecommissioning)) return;
  host_.decommissionBegan();
  const bool migrate = migrationEnabled();
  logger("agent")->info("Decommission executor {} ({}); {} running task(s), block migration {}",
                        executor_id_, reason, host_.runningTasks(), migrate ? "on" : "off");
  if (decommissioner_ != nullptr) decommissioner_->begin();
  if (options_.deadline.count() > 0) {
    deadline_timer_ = timers_.schedule(options_.deadline, [this] { deadlinePassed(); });
  }
  // As in the seed, blocks start moving at once, while running tasks go on.
  if (migrate) startPass();
  scheduleCheck();
  logger("agent")->info("Will exit when finished decommissioning");
}

// ---- The wait loop -------------------------------------------------------------------------

void DecommissionFlow::scheduleCheck() {
  check_timer_ = timers_.schedule(options_.check_interval, [this] { check(); });
}

void DecommissionFlow::check() {
  check_timer_.reset();
  if (host_.stopping()) return;
  const bool migrate = migrationEnabled();
  // A pass proves every block moved only if no task ended (and so added blocks) since it
  // started: the seed's "migration time > last task finish time".
  const bool conclusive = last_pass_conclusive_ && last_pass_ends_ == task_ends_;
  const std::size_t running = host_.runningTasks();
  if (running == 0) {
    if (!migrate) {
      finish("No running tasks, no block migration configured, stopping.");
      return;
    }
    if (conclusive) {
      finish("No running tasks, all blocks migrated, stopping.");
      return;
    }
    logger("agent")->debug("No running tasks; blocks not yet all migrated");
  } else {
    logger("agent")->debug("Blocked from shutdown by {} running task(s)", running);
  }
  if (migrate && !pass_running_ && !conclusive) startPass();
  scheduleCheck();
}

void DecommissionFlow::finish(std::string_view why) {
  logger("agent")->info("{}", why);
  if (!moveTo(Phase::kFinished)) return;
  host_.exit(ExitCode::kSuccess, "decommission finished");
}

void DecommissionFlow::deadlinePassed() {
  deadline_timer_.reset();
  if (host_.stopping()) return;
  std::vector<std::string> left;
  if (migrationEnabled()) left = decommissioner_->blocksLeft();
  for (const auto& id : left)
    logger("agent")->error("block {} was not migrated before the deadline", id);
  const std::size_t running = host_.runningTasks();
  if (running > 0) {
    logger("agent")->error("{} task(s) still running at the decommission deadline", running);
  }
  if (!moveTo(Phase::kDeadlinePassed)) return;
  host_.exit(ExitCode::kDecommissionIncomplete,
             fmt::format("decommission deadline ({} ms) passed: {} block(s) not migrated, {} "
                         "task(s) running",
                         options_.deadline.count(), left.size(), running));
}

void DecommissionFlow::stop() {
  if (check_timer_) {
    timers_.cancel(*check_timer_);
    check_timer_.reset();
  }
  if (deadline_timer_) {
    timers_.cancel(*deadline_timer_);
    deadline_timer_.reset();
  }
  if (pass_running_ && decommissioner_ != nullptr) decommissioner_->cancel();
}

// ---- Migration passes ----------------------------------------------------------------------

void DecommissionFlow::startPass() {
  pass_running_ = true;
  ++passes_;
  if (!migration_started_) migration_started_ = timers_.now();
  const std::uint64_t ends_at_start = task_ends_;
  link_.ask(proto::makeMessage(proto::GetPeers{.executor_id = executor_id_}), ask_timeout_,
            [this, ends_at_start](const AskResult& result) {
              if (host_.stopping()) {
                pass_running_ = false;
                return;
              }
              std::vector<proto::Peer> peers;
              if (result.ok) {
                host_.driverAnswered();
                try {
                  peers = proto::parsePeers(result.body);
                } catch (const proto::BodyError& e) {
                  logger("agent")->warn("the driver's GetPeers reply is invalid at {}: {}",
                                        e.path(), e.detail());
                }
              } else {
                logger("agent")->warn("cannot get peers from the driver: {}", result.error.message);
              }
              logger("agent")->debug("migration pass {} with {} peer(s)", passes_, peers.size());
              pass_progress_ = MigrationPassProgress{};
              decommissioner_->startPass(
                  std::move(peers),
                  [this](MigrationPassProgress progress) {
                    if (pass_running_) pass_progress_ = progress;
                  },
                  [this, ends_at_start](const MigrationPassResult& pass) {
                    onPassDone(pass, ends_at_start);
                  });
            });
}

void DecommissionFlow::onPassDone(const MigrationPassResult& result, std::uint64_t ends_at_start) {
  pass_running_ = false;
  pass_progress_ = MigrationPassProgress{};
  if (host_.stopping()) return;
  bool told = true;
  if (!result.moved.empty()) {
    proto::UpdateBlockInfo info;
    info.executor_id = executor_id_;
    info.added = result.moved;
    for (const auto& block : result.moved) info.removed.push_back(block.id);
    // Only once the driver has been told may the local copies go.
    told = host_.sendInOrder(proto::makeMessage(info));
    if (told) {
      decommissioner_->release(info.removed);
      blocks_migrated_ += result.moved.size();
      bytes_migrated_ += result.bytes_moved;
    } else {
      logger("agent")->warn(
          "cannot tell the driver where {} block(s) went yet; keeping the local copies",
          result.moved.size());
    }
  }
  for (const auto& [id, why] : result.failed)
    logger("agent")->warn("block {} not migrated: {}", id, why);
  blocks_failed_ = result.failed.size();
  blocks_left_ = result.blocks_left + (told ? 0 : result.moved.size());
  bytes_left_ = result.bytes_left + (told ? 0 : result.bytes_moved);
  last_pass_conclusive_ = result.complete && told;
  last_pass_ends_ = ends_at_start;
  logger("agent")->info("migration pass {}: {} block(s) moved, {} failed, {} left", passes_,
                        result.moved.size(), result.failed.size(), blocks_left_);
}

// ---- Progress ------------------------------------------------------------------------------

std::optional<protocol::DecommissionProgress> DecommissionFlow::figures() const {
  if (!decommissioning()) return std::nullopt;
  protocol::DecommissionProgress f;
  f.running_tasks = host_.runningTasks();
  if (phase_ == Phase::kDecommissioning) {
    f.state = f.running_tasks > 0 ? "waiting-for-tasks"
                                  : (migrationEnabled() ? "migrating" : "finishing");
  } else {
    f.state = toString(phase_);  // finished, deadline-passed
  }
  // While a pass runs, what it has moved so far counts as migrated, and what it set out to
  // move (its own count of the blocks here) replaces the last pass's count of what was left.
  f.blocks_migrated = blocks_migrated_;
  f.bytes_migrated = bytes_migrated_;
  f.blocks_left = blocks_left_;
  f.bytes_left = bytes_left_;
  if (pass_running_ && pass_progress_.blocks_total > 0) {
    f.blocks_migrated += pass_progress_.blocks_moved;
    f.bytes_migrated += pass_progress_.bytes_moved;
    f.blocks_left = pass_progress_.blocks_total -
                    std::min(pass_progress_.blocks_moved, pass_progress_.blocks_total);
    f.bytes_left = pass_progress_.bytes_total -
                   std::min(pass_progress_.bytes_moved, pass_progress_.bytes_total);
  }
  // The rate since the first pass began, and the time the bytes left take at that rate.
  if (migration_started_) {
    const double seconds =
        std::chrono::duration<double>(timers_.now() - *migration_started_).count();
    if (seconds > 0 && f.bytes_migrated > 0) {
      const double per_s = static_cast<double>(f.bytes_migrated) / seconds;
      f.bytes_per_s = static_cast<std::uint64_t>(per_s);
      f.eta_ms = static_cast<std::uint64_t>(static_cast<double>(f.bytes_left) / per_s * 1000.0);
    }
  }
  f.blocks_failed = blocks_failed_;
  f.passes = passes_;
  return f;
}

}  // namespace dockhand::agent
