// The Backend's transitions (see backend.h). A little over 600 lines: its handlers are the
// agent's whole protocol state, one per message and port event; decommissioning, the largest
// seam, lives in decommission_flow.cpp.
#include "core/backend.h"

#include <algorithm>
#include <charconv>
#include <stdexcept>

#include "dockhand/base/log_format.h"
#include "dockhand/base/logging.h"

namespace dockhand::agent {
namespace {
// The discovery hook's refusal, carried out of applyAppConfig.
struct ResourcesUnavailable : std::runtime_error {
  using std::runtime_error::runtime_error;
};
}  // namespace

namespace proto = dockhand::protocol;

namespace {

double seconds(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

std::shared_ptr<spdlog::logger> log() { return logger("agent"); }

// How many bytes the base64 text `encoded` stands for (padding or not): what the log says of
// delegation tokens, whose text itself is never logged.
std::size_t base64DecodedSize(const std::string& encoded) {
  std::size_t n = encoded.size();
  while (n > 0 && encoded[n - 1] == '=') --n;
  return n * 3 / 4;
}

// Reads a positive millisecond count from the app config's properties.
std::optional<Millis> millisProperty(const std::map<std::string, std::string>& props,
                                     const std::string& key) {
  auto it = props.find(key);
  if (it == props.end()) return std::nullopt;
  long long value = 0;
  const std::string& text = it->second;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value <= 0) {
    log()->warn("ignoring app config property {}='{}': expected a positive number of ms", key,
                text);
    return std::nullopt;
  }
  return Millis(value);
}

}  // namespace

std::string_view toString(Backend::State state) {
  switch (state) {
    case Backend::State::kIdle:
      return "idle";
    case Backend::State::kConnecting:
      return "connecting";
    case Backend::State::kFetchingConfig:
      return "fetching-config";
    case Backend::State::kRegistering:
      return "registering";
    case Backend::State::kRunning:
      return "running";
    case Backend::State::kReconnecting:
      return "reconnecting";
    case Backend::State::kStopping:
      return "stopping";
  }
  return "unknown";
}

Backend::Backend(BackendOptions options, DriverLink& link, Executor& executor, Timers& timers,
                 LogControl& log_control, Exiter& exiter, Decommissioner* decommissioner)
    : options_(std::move(options)),
      link_(link),
      executor_(executor),
      timers_(timers),
      log_control_(log_control),
      exiter_(exiter),
      metrics_(options_.metrics != nullptr ? *options_.metrics : metrics::defaultRegistry()),
      task_log_url_(options_.task_log_url),
      decommission_(options_.decommission, options_.executor_id, options_.ask_timeout, link_,
                    timers_, decommissioner, *this) {
  restart_resume_ = options_.resume_after_restart;
}

Backend::TaskMetrics::TaskMetrics(metrics::Registry& registry)
    : started(registry
                  .counter("dockhand_tasks_started_total",
                           "Tasks this agent accepted from the driver and handed to a runner.")
                  .get()),
      duration(registry
                   .histogram("dockhand_task_duration_seconds",
                              "Time from a task's LaunchTask to its final status, by the agent's "
                              "clock.",
                              {}, metrics::durationBuckets())
                   .get()),
      launch_latency(registry
                         .histogram("dockhand_task_launch_latency_seconds",
                                    "Time from a task's LaunchTask to its runner reporting it "
                                    "RUNNING.",
                                    {}, metrics::latencyBuckets())
                         .get()) {
  auto& family =
      registry.counter("dockhand_tasks_ended_total",
                       "Final task status updates this agent sent, by state.", {"state"});
  for (auto state : {proto::TaskState::kFinished, proto::TaskState::kFailed,
                     proto::TaskState::kKilled, proto::TaskState::kLost}) {
    ended[static_cast<std::size_t>(state)] = &family.labels({std::string(proto::toString(state))});
  }
}

void Backend::setState(State next) {
  // The only legal moves: forward through the bootstrap, Running to Reconnecting and back, or
  // to Stopping from anywhere.
  const bool bootstrap = next <= State::kRunning && state_ < State::kRunning &&
                         static_cast<int>(next) == static_cast<int>(state_) + 1;
  // A resume after a restart that the driver refused: register anew on a new connection.
  const bool register_anew = state_ == State::kRegistering && next == State::kConnecting;
  const bool legal = next == State::kStopping || bootstrap || register_anew ||
                     (state_ == State::kRunning && next == State::kReconnecting) ||
                     (state_ == State::kReconnecting && next == State::kRunning);
  if (!legal) {
    log()->error("illegal state transition {} -> {}", toString(state_), toString(next));
    return;
  }
  log()->debug("state {} -> {}", toString(state_), toString(next));
  bool stopping = next == State::kStopping && state_ != State::kStopping;
  state_ = next;
  if (next == State::kRunning && options_.on_running) options_.on_running();
  if (stopping && options_.on_stopping) options_.on_stopping(restarting_);
}

void Backend::start() {
  if (state_ != State::kIdle) return;
  log()->info("Connecting to driver: {}", options_.driver_url);
  setState(State::kConnecting);
  connect();
}

void Backend::connect() {
  ++connect_attempts_;
  link_.connect();
}

void Backend::onDriverConnected() {
  if (state_ == State::kReconnecting) {
    resume();
    return;
  }
  if (state_ != State::kConnecting) return;
  last_driver_message_ = timers_.now();
  setState(State::kFetchingConfig);
  fetchAppConfig();
}

void Backend::onDriverConnectFailed(const std::string& reason, bool retryable) {
  if (state_ == State::kReconnecting) {
    onReconnectFailed(reason, retryable);
    return;
  }
  if (state_ != State::kConnecting) return;
  if (retryable && connect_attempts_ < options_.connect_tries) {
    log()->warn("cannot connect to driver {} (try {} of {}): {}", options_.driver_url,
                connect_attempts_, options_.connect_tries, reason);
    timers_.schedule(options_.connect_retry_delay * connect_attempts_, [this] {
      if (state_ == State::kConnecting) connect();
    });
    return;
  }
  exitExecutor(ExitCode::kBootstrapFailed,
               fmt::format("cannot connect to driver {} after {} tries: {}", options_.driver_url,
                           connect_attempts_, reason),
               /*notify_driver=*/false);
}

void Backend::onDriverAuthFailed(const std::string& reason) {
  if (state_ != State::kConnecting && state_ != State::kReconnecting) return;
  exitExecutor(ExitCode::kAuthFailed,
               fmt::format("authentication with driver {} failed: {}", options_.driver_url, reason),
               /*notify_driver=*/false);
}

void Backend::fetchAppConfig() {
  proto::RetrieveAppConfig ask{options_.resource_profile_id};
  link_.ask(proto::makeMessage(ask), options_.ask_timeout, [this](AskResult result) {
    if (state_ != State::kFetchingConfig) return;
    if (!result.ok) {
      exitExecutor(ExitCode::kBootstrapFailed,
                   fmt::format("cannot fetch the app config from driver {}: {}",
                               options_.driver_url, result.error.message),
                   /*notify_driver=*/false);
      return;
    }
    last_driver_message_ = timers_.now();  // a reply is the driver speaking, too
    try {
      applyAppConfig(result.body);
    } catch (const proto::BodyError& e) {
      exitExecutor(ExitCode::kBootstrapFailed,
                   fmt::format("the driver sent an invalid app config: {}", e.what()),
                   /*notify_driver=*/false);
      return;
    } catch (const ResourcesUnavailable& e) {
      exitExecutor(ExitCode::kResourcesUnavailable, e.what(), /*notify_driver=*/false);
      return;
    }
    setState(State::kRegistering);
    registerWithDriver();
  });
}

void Backend::applyAppConfig(const Json& body) {
  auto config = proto::decodeBody<proto::AppConfig>(body);
  if (options_.discover_resources) {
    std::string refusal = options_.discover_resources(config.resource_profile, options_.resources);
    if (!refusal.empty()) throw ResourcesUnavailable(refusal);
  }
  properties_ = std::move(config.properties);
  properties_["dockhand.app.id"] = options_.app_id;
  if (config.log_level) {
    if (!log_control_.setLevel(*config.log_level)) {
      log()->warn("ignoring unknown log level '{}' from the app config", *config.log_level);
    }
  }
  if (!config.delegation_tokens.empty()) {
    delegation_tokens_ = std::move(config.delegation_tokens);
    log()->info("received delegation tokens ({} bytes)", base64DecodedSize(delegation_tokens_));
  }
  if (auto v = millisProperty(properties_, "dockhand.heartbeat.interval_ms")) {
    options_.heartbeat_interval = *v;
  }
  if (auto v = millisProperty(properties_, "dockhand.driver.timeout_ms")) {
    options_.driver_timeout = *v;
  }
}

void Backend::registerWithDriver() {
  if (restart_resume_) {
    resumeAfterRestart();
    return;
  }
  proto::RegisterExecutor reg;
  reg.executor_id = options_.executor_id;
  reg.hostname = options_.hostname;
  reg.cores = options_.cores;
  reg.log_urls = options_.log_urls;
  reg.attributes = options_.attributes;
  reg.resources = options_.resources;
  reg.resource_profile_id = options_.resource_profile_id;
  reg.block_url = options_.block_url;
  reg.waits_for_cores = true;  // see handleLaunchTask
  reg.resumes = resumable();
  link_.ask(proto::makeMessage(reg), options_.ask_timeout, [this](AskResult result) {
    if (state_ != State::kRegistering) return;
    if (result.ok) {
      last_driver_message_ = timers_.now();  // a reply is the driver speaking, too
      onRegistered();
      return;
    }
    bool refused = result.error.code != proto::error_code::kTimeout &&
                   result.error.code != proto::error_code::kDisconnected;
    if (refused) {
      exitExecutor(ExitCode::kRegistrationRefused,
                   fmt::format("the driver refused the registration of executor {}: {} ({})",
                               options_.executor_id, result.error.message, result.error.code),
                   /*notify_driver=*/false);
    } else {
      exitExecutor(ExitCode::kBootstrapFailed,
                   fmt::format("cannot register with driver {}: {}", options_.driver_url,
                               result.error.message),
                   /*notify_driver=*/false);
    }
  });
}

void Backend::onRegistered() {
  log()->info("Successfully registered with driver as executor {} ({} cores)", options_.executor_id,
              options_.cores);
  setState(State::kRunning);
  link_.send(proto::makeMessage(proto::LaunchedExecutor{options_.executor_id}));
  scheduleHeartbeat();
}

void Backend::scheduleHeartbeat() {
  heartbeat_timer_ = timers_.schedule(options_.heartbeat_interval, [this] { heartbeat(); });
}

void Backend::heartbeat() {
  heartbeat_timer_.reset();
  if (exiting_ || state_ != State::kRunning) return;  // Reconnecting: resume() starts them again
  auto silent = std::chrono::duration_cast<Millis>(timers_.now() - last_driver_message_);
  if (silent > options_.driver_timeout) {
    const std::string why =
        fmt::format("driver {} silent for {} ms (timeout {} ms)", options_.driver_url,
                    silent.count(), options_.driver_timeout.count());
    if (resumable()) link_.close();  // a silent connection is given up like a dropped one
    connectionLost(why);
    return;
  }
  proto::Heartbeat beat;
  beat.executor_id = options_.executor_id;
  beat.running_tasks = static_cast<int>(running_.size());
  beat.decommission = decommissionProgress();
  beat.sent_at_ms = static_cast<std::uint64_t>(
      std::chrono::duration_cast<Millis>(std::chrono::system_clock::now().time_since_epoch())
          .count());
  link_.send(proto::makeMessage(beat));
  flushOutbox();
  pruneEarlyKills();
  scheduleHeartbeat();
}

// ---- Frames from the driver ----------------------------------------------------------------

void Backend::replyError(const proto::Envelope& frame, std::string_view code, std::string message) {
  log()->warn("{} from driver: {}", frame.type, message);
  if (frame.id != 0) {
    link_.send(proto::makeErrorReply(frame.id, code, std::move(message)));
  } else {
    link_.send(proto::makeError(code, std::move(message)));
  }
}

void Backend::onDriverFrame(const proto::Envelope& frame) {
  last_driver_message_ = timers_.now();
  if (frame.isError()) {
    log()->warn("the driver reported an error: {} ({})", frame.error->message, frame.error->code);
    return;
  }
  const proto::MessageSpec* spec = proto::findMessage(frame.type);
  if (spec == nullptr) {
    replyError(frame, proto::error_code::kUnknownType,
               fmt::format("unknown message type '{}'", frame.type));
    return;
  }
  if (spec->direction == proto::Direction::kAgentToDriver) {
    replyError(frame, proto::error_code::kUnexpectedMessage,
               fmt::format("{} is sent by agents, not to them", frame.type));
    return;
  }
  try {
    switch (spec->type) {
      case proto::MessageType::kHello: {
        proto::decodeBody<proto::Hello>(frame.body);
        if (frame.id != 0) {
          link_.send(proto::makeReply(
              frame.id, proto::toJson(proto::Hello{proto::kProtocolVersion, "agent", ""})));
        }
        break;
      }
      case proto::MessageType::kLaunchTask:
        handleLaunchTask(frame);
        break;
      case proto::MessageType::kKillTask:
        handleKillTask(frame);
        break;
      case proto::MessageType::kStopExecutor:
        proto::decodeBody<proto::StopExecutor>(frame.body);
        log()->info("Driver commanded a shutdown");
        exitExecutor(ExitCode::kSuccess, "stopped by the driver", /*notify_driver=*/false);
        break;
      case proto::MessageType::kShutdown:
        proto::decodeBody<proto::Shutdown>(frame.body);
        // As in the seed: a Shutdown before the executor exists is a failure.
        exitExecutor(state_ == State::kRunning ? ExitCode::kSuccess : ExitCode::kInternalError,
                     "shutdown requested by the driver", /*notify_driver=*/false);
        break;
      case proto::MessageType::kUpdateDelegationTokens: {
        auto msg = proto::decodeBody<proto::UpdateDelegationTokens>(frame.body);
        delegation_tokens_ = std::move(msg.tokens);
        log()->info("received delegation tokens ({} bytes)", base64DecodedSize(delegation_tokens_));
        break;
      }
      case proto::MessageType::kUpdateExecutorLogLevel: {
        auto msg = proto::decodeBody<proto::UpdateExecutorLogLevel>(frame.body);
        if (log_control_.setLevel(msg.level)) {
          log()->info("log level set to {} by the driver", msg.level);
        } else {
          replyError(frame, proto::error_code::kInvalidBody,
                     fmt::format("unknown log level '{}' (trace, debug, info, warn, error, off)",
                                 msg.level));
        }
        break;
      }
      case proto::MessageType::kDecommissionExecutor: {
        auto msg = proto::decodeBody<proto::DecommissionExecutor>(frame.body);
        decommission_.onDriverRequest(msg.reason.empty() ? "requested by the driver" : msg.reason);
        break;
      }
      case proto::MessageType::kTaskThreadDump:
        handleThreadDump(frame);
        break;
      case proto::MessageType::kHeartbeat:
        proto::decodeBody<proto::Heartbeat>(frame.body);
        break;
      default:
        replyError(frame, proto::error_code::kUnexpectedMessage,
                   fmt::format("{} is not expected by an agent", frame.type));
        break;
    }
  } catch (const proto::BodyError& e) {
    replyError(frame, proto::error_code::kInvalidBody,
               fmt::format("invalid {} body at {}: {}", frame.type, e.path(), e.detail()));
  }
}

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
  if (running_.count(task.task_id) != 0 || findWaiting(task.task_id) != waiting_.end()) {
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
    log()->info("task {} was killed before it arrived ({}); not starting it", task.task_id,
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
    log()->info("refusing task {}: decommissioning", task.task_id);
    update.state = proto::TaskState::kLost;
    update.reason = fmt::format("executor {} is decommissioning", options_.executor_id);
    sendStatus(update);
    return;
  }
  log()->debug("Got assigned task {} ({})", task.task_id, task.name);
  const TimePoint received = timers_.now();
  // Within the registered cores; behind the tasks already waiting (see backend.h).
  if (!waiting_.empty() || !fitsNow(task.cpus)) {
    log()->debug("task {} waits for cores: {} of {} in use, {} task(s) waiting before it",
                 task.task_id, coresInUse(), options_.cores, waiting_.size());
    waiting_.push_back(WaitingTask{std::move(task), received});
    return;
  }
  startTask(task, received);
}

bool Backend::fitsNow(int cpus) const {
  // Nothing running: any task starts, even one larger than the agent.
  const int in_use = coresInUse();
  return in_use <= 0 || in_use + cpus <= options_.cores;
}

std::deque<Backend::WaitingTask>::iterator Backend::findWaiting(std::uint64_t task_id) {
  return std::find_if(waiting_.begin(), waiting_.end(),
                      [&](const WaitingTask& w) { return w.task.task_id == task_id; });
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
  running_.emplace(task.task_id, RunningTask{task.cpus, task.resources, received, false});
  metrics_.started.inc();
  if (auto launched = executor_.launch(task); !launched) {
    running_.erase(task.task_id);
    metrics_.duration.observe(seconds(timers_.now() - received));
    log()->warn("task {} could not start: {}", task.task_id, launched.error().message);
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
  while (!waiting_.empty() && !exiting_ && !decommission_.decommissioning() &&
         fitsNow(waiting_.front().task.cpus)) {
    WaitingTask next = std::move(waiting_.front());
    waiting_.pop_front();
    const TaskLogScope scope(next.task.task_id);
    startTask(next.task, next.received);
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
  if (waiting_.empty()) return;
  log()->info("{} task(s) waiting for cores end {}: {}", waiting_.size(), proto::toString(state),
              reason);
  std::deque<WaitingTask> ended;
  ended.swap(waiting_);
  for (const auto& w : ended) endUnstarted(w.task, state, reason);
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
  if (auto waiting = findWaiting(kill.task_id); waiting != waiting_.end()) {
    log()->info("task {} killed before it started ({})", kill.task_id, reason);
    const proto::TaskDescription task = std::move(waiting->task);
    waiting_.erase(waiting);
    endUnstarted(task, proto::TaskState::kKilled, std::move(reason));
    startWaiting();  // the next in line may fit where this one did not
    return;
  }
  if (running_.count(kill.task_id) != 0) {
    if (!executor_.kill(kill.task_id, kill.interrupt, reason)) {
      log()->debug("kill of task {}: it already ended", kill.task_id);
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
    log()->warn("forgetting the kill of task {}: more than {} kills are remembered", oldest->first,
                options_.max_remembered_kills);
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
  if (findWaiting(ask.task_id) != waiting_.end()) {
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
    log()->warn("status {} for unknown task {} ignored", proto::toString(status.state),
                status.task_id);
    return;
  }
  if (orphaned_.count(status.task_id) != 0) {
    if (proto::isTerminal(status.state)) {
      log()->info("task {} of the refused session ended ({}); not reported", status.task_id,
                  proto::toString(status.state));
      orphaned_.erase(status.task_id);
      running_.erase(it);
    }
    return;
  }
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
  update.cpus = it->second.cpus;
  update.resources = it->second.resources;
  if (!task_log_url_.empty()) {
    for (const char* stream : {"stdout", "stderr"}) {
      update.log_urls[stream] = task_log_url_.expand(status.task_id, stream);
    }
  }
  if (status.state == proto::TaskState::kRunning && !it->second.reported_running) {
    it->second.reported_running = true;
    metrics_.launch_latency.observe(seconds(timers_.now() - it->second.received));
  }
  if (proto::isTerminal(status.state)) {
    metrics_.duration.observe(seconds(timers_.now() - it->second.received));
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
  if (proto::isTerminal(status.state) && !waiting_.empty()) {
    // The driver hears of the freed cores before the next task's launch work holds the
    // status back: with tasks sent ahead, it sends the next ones meanwhile.
    link_.flush();
    startWaiting();
  }
}

void Backend::sendStatus(const proto::StatusUpdate& update) {
  std::uint64_t task_id = update.task_id;
  const bool final_status = proto::isTerminal(update.state);
  if (final_status) metrics_.ended[static_cast<std::size_t>(update.state)]->inc();
  sendInOrder(proto::makeMessage(update), task_id, final_status);
}

bool Backend::sendInOrder(proto::Envelope frame, std::uint64_t task_id, bool final_status) {
  // Keep order: once something waits in the outbox, everything queues behind it. Nothing is
  // sent while Reconnecting until the driver has taken the agent back.
  if (outbox_.empty() && sendsNow() && link_.connected() && link_.send(frame)) {
    if (final_status) rememberEnd(task_id, std::move(frame));
    return true;
  }
  outbox_.push_back(Outgoing{std::move(frame), task_id, final_status});
  if (outbox_.size() == 1) {
    log()->warn("cannot send status updates to the driver right now; queueing them");
  }
  return false;
}

void Backend::flushOutbox() {
  if (!sendsNow()) return;
  while (!outbox_.empty() && link_.connected()) {
    Outgoing& next = outbox_.front();
    if (!link_.send(next.frame)) return;
    if (next.final_status) rememberEnd(next.task_id, std::move(next.frame));
    outbox_.pop_front();
  }
}

// ---- Loss and exit -------------------------------------------------------------------------

void Backend::onDriverDisconnected(const std::string& reason) {
  if (exiting_) {
    log()->info("driver {} disconnected during shutdown", options_.driver_url);
    return;
  }
  if (state_ == State::kReconnecting) {
    // The new connection went before the driver answered the resume: try again.
    onReconnectFailed("disconnected: " + reason, true);
    return;
  }
  connectionLost(fmt::format("driver {} disconnected: {}", options_.driver_url, reason));
}

void Backend::onWorkerLost(const std::string& reason) {
  if (exiting_) return;  // the seed ignores the worker while the executor is stopping
  exitExecutor(ExitCode::kWorkerLost, fmt::format("worker lost: {}", reason),
               /*notify_driver=*/true);
}

void Backend::onPluginUnrecoverable(const std::string& plugin, const std::string& reason) {
  exitExecutor(ExitCode::kTaskUnkillable,
               fmt::format("plugin '{}' cannot recover: {}", plugin, reason),
               /*notify_driver=*/true);
}

void Backend::onStopRequested(const std::string& reason) {
  exitExecutor(ExitCode::kSuccess, reason, /*notify_driver=*/true);
}

void Backend::exitExecutor(ExitCode code, const std::string& reason, bool notify_driver) {
  if (exiting_) {
    log()->info("Skip exiting executor ({}): already asked to exit before", reason);
    return;
  }
  exiting_ = true;
  if (code == ExitCode::kSuccess || code == ExitCode::kRestartInPlace) {
    log()->info("Executor self-exiting: {}", reason);
  } else {
    log()->error("Executor self-exiting (exit code {}): {}", toInt(code), reason);
  }
  setState(State::kStopping);
  if (heartbeat_timer_) {
    timers_.cancel(*heartbeat_timer_);
    heartbeat_timer_.reset();
  }
  decommission_.stop();
  if (notify_driver && link_.connected()) {
    link_.send(proto::makeMessage(proto::RemoveExecutor{options_.executor_id, reason}));
  }
  endWaiting(proto::TaskState::kKilled, "executor is stopping");
  if (code == ExitCode::kRestartInPlace) {
    if (restart_timer_) timers_.cancel(*restart_timer_);
    handOverTasks();
  }
  if (!running_.empty()) {
    log()->info("stopping {} running task(s)", running_.size());
    executor_.stopAll(options_.stop_grace);
  }
  // Statuses the stopped tasks reported are events queued behind this one: let them be sent
  // before the link closes.
  timers_.schedule(Millis(0), [this, code] { finishExit(code); });
}

void Backend::finishExit(ExitCode code) {
  flushOutbox();
  if (!outbox_.empty()) {
    std::string ids;
    std::size_t statuses = 0;
    std::string others;
    for (const auto& u : outbox_) {
      if (u.frame.type == "StatusUpdate") {
        ++statuses;
        ids += (ids.empty() ? "" : ", ") + std::to_string(u.task_id);
      } else {
        others += (others.empty() ? "" : ", ") + u.frame.type;
      }
    }
    if (statuses > 0) {
      log()->error("{} status update(s) could not be delivered (driver unreachable): tasks {}",
                   statuses, ids);
    }
    if (!others.empty()) {
      log()->error("also undelivered (driver unreachable): {}", others);
    }
  }
  link_.close();
  exiter_.exit(toInt(code));
}

// ---- Decommission (DecommissionFlow does the work) -----------------------------------------

void Backend::onDecommissionSignal() {
  if (state_ == State::kReconnecting) {
    // The driver must hear of it first (ExecutorDecommissioning): once it takes us back.
    log()->warn("decommission signal while reconnecting to the driver: carried out once resumed");
    decommission_after_resume_ = true;
    return;
  }
  decommission_.onSignal();
}

void Backend::driverAnswered() { last_driver_message_ = timers_.now(); }

bool Backend::sendInOrder(proto::Envelope frame) { return sendInOrder(std::move(frame), 0); }

void Backend::exit(ExitCode code, const std::string& reason) {
  exitExecutor(code, reason, /*notify_driver=*/true);
}

int Backend::coresInUse() const {
  int cores = 0;
  for (const auto& [id, task] : running_) cores += task.cpus;
  return cores;
}

Json Backend::statusJson() const {
  return Json{
      {"executor_id", options_.executor_id},
      {"state", decommission_.decommissioning() && !exiting_ ? std::string("decommissioning")
                                                             : std::string(toString(state_))},
      {"running_tasks", running_.size()},
      {"waiting_tasks", waiting_.size()},
      {"cores", {{"total", options_.cores}, {"in_use", coresInUse()}}},
      {"queued_updates", outbox_.size()},
      {"decommission", decommissionProgress()}};
}

}  // namespace dockhand::agent
