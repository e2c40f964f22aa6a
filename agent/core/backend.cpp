// The Backend's transitions (see backend.h): the bootstrap, the frames from the driver, loss
// and exit. The task handlers are in backend_tasks.cpp; the in-order sends, reconnecting and
// restarts in backend_resume.cpp; decommissioning in decommission_flow.cpp.
#include "core/backend.h"

#include <charconv>
#include <stdexcept>
#include <utility>

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
      metrics_(metrics::registryOr(options_.metrics, own_metrics_)),
      task_log_url_(options_.task_log_url),
      queue_(options_.cores),
      decommission_(options_.decommission, options_.executor_id, options_.ask_timeout, link_,
                    timers_, decommissioner, *this) {
  restart_resume_ = options_.resume_after_restart;
}

Backend::TaskCounters::TaskCounters(metrics::Registry& registry)
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
                         .get()),
      running_skipped(registry
                          .counter("dockhand_task_running_updates_skipped_total",
                                   "RUNNING updates not sent because the task ended before the "
                                   "agent's core thread was idle: its final status was sent "
                                   "alone.")
                          .get()),
      cpu_time(registry
                   .histogram("dockhand_task_cpu_seconds",
                              "CPU time (user and system) of the tasks that ended, as their "
                              "runner measured it.",
                              {}, metrics::durationBuckets())
                   .get()),
      peak_rss(registry
                   .histogram("dockhand_task_peak_rss_bytes",
                              "Peak resident memory of the process tasks that ended, as their "
                              "runner measured it.",
                              {}, metrics::memoryBuckets())
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
    auto found = options_.discover_resources(config.resource_profile);
    if (!found) throw ResourcesUnavailable(found.error().message);
    options_.resources = std::move(*found);
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
  link_.send(proto::makeMessage(proto::LaunchedExecutor{.executor_id = options_.executor_id}));
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
  if (options_.sample_usage) {
    beat.metrics = options_.sample_usage();
    if (beat.metrics.tasks_rss_bytes) {
      beat.metrics.peak_tasks_rss_bytes = std::max(*beat.metrics.tasks_rss_bytes, ended_peak_rss_);
    }
    ended_peak_rss_ = 0;
  }
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
              frame.id,
              proto::toJson(proto::Hello{
                  .protocol_version = proto::kProtocolVersion, .role = "agent", .software = ""})));
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
    link_.send(proto::makeMessage(
        proto::RemoveExecutor{.executor_id = options_.executor_id, .reason = reason}));
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

void Backend::exit(ExitCode code, const std::string& reason) {
  exitExecutor(code, reason, /*notify_driver=*/true);
}

int Backend::coresInUse() const {
  int cores = 0;
  for (const auto& [id, task] : running_) cores += task.cpus;
  return cores;
}

BackendFigures Backend::figures() const {
  BackendFigures f;
  f.state = decommission_.decommissioning() && !exiting_ ? std::string("decommissioning")
                                                         : std::string(toString(state_));
  f.running_tasks = running_.size();
  f.waiting_tasks = queue_.size();
  f.cores = options_.cores;
  f.cores_in_use = coresInUse();
  f.queued_updates = outbox_.size();
  f.decommission = decommission_.figures();
  return f;
}

Json Backend::statusJson(const BackendFigures& f) const {
  return Json{{"executor_id", options_.executor_id},
              {"state", f.state},
              {"running_tasks", f.running_tasks},
              {"waiting_tasks", f.waiting_tasks},
              {"cores", {{"total", f.cores}, {"in_use", f.cores_in_use}}},
              {"queued_updates", f.queued_updates},
              {"decommission", proto::toJson(f.decommission)}};
}

}  // namespace dockhand::agent
