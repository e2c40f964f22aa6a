// DriverService's core: its lifetime (start, stop), the `run` command's side (submit, waits,
// decommission, inspect), carrying out the scheduler's actions, and the ticker thread. The
// agent protocol is in driver_service_frames.cpp, the Hello handshake in
// driver_service_handshake.cpp, the control API in driver_service_control.cpp.
#include "dockhand/driver/driver_service.h"

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

#include "dockhand/base/logging.h"
#include "dockhand/base/thread_name.h"

#ifndef DOCKHAND_VERSION
#define DOCKHAND_VERSION "0.0.0"
#endif

namespace dockhand::driver {
namespace {

std::uint64_t wallClockMs() {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                        std::chrono::system_clock::now().time_since_epoch())
                                        .count());
}

}  // namespace

std::string driverSoftware() { return std::string("dockhand-driver ") + DOCKHAND_VERSION; }

DriverService::DriverService(DriverConfig config, std::function<TimePoint()> now,
                             std::unique_ptr<EventLog> event_log)
    : config_(std::move(config)),
      now_(std::move(now)),
      scheduler_(SchedulerOptions{config_.max_attempts, Millis(config_.agent_timeout_ms),
                                  config_.launch_ahead, Millis(config_.agent_reconnect_grace_ms)}),
      event_log_(std::move(event_log)),
      result_fetcher_(
          ResultFetchOptions{Millis(config_.result_fetch_timeout_ms), config_.max_result_bytes, 2,
                             config_.secret ? protocol::auth::makeRequestSigner(*config_.secret)
                                            : protocol::auth::RequestSigner{},
                             config_.tls_client}) {
  app_config_.properties = config_.properties;
  app_config_.properties.try_emplace(kHeartbeatIntervalProperty,
                                     std::to_string(config_.heartbeat_interval_ms));
  app_config_.log_level = config_.log_level;
  app_config_.resource_profile = config_.resource_profile;
  if (config_.secret) {
    control_verifier_ = std::make_unique<protocol::auth::RequestVerifier>(*config_.secret);
  }
}

DriverService::~DriverService() { stop(); }

void DriverService::addAppProperties(const std::map<std::string, std::string>& properties) {
  for (const auto& [key, value] : properties) app_config_.properties[key] = value;
}

void DriverService::start(const std::string& host, std::uint16_t port) {
  metrics::registerProcessInfo(registry_, "dockhand-driver", DOCKHAND_VERSION, DOCKHAND_BUILD);
  ServerOptions options;
  options.host = host;
  options.port = port;
  options.max_frame_bytes = config_.max_frame_bytes;
  options.threads = config_.server_threads;
  options.hello_timeout_ms = config_.hello_timeout_ms;
  options.idle_timeout_ms = config_.agent_timeout_ms;
  options.max_queued_frames = config_.max_queued_frames;
  options.tls = config_.tls_server;
  server_ = std::make_unique<AgentServer>(options, *this);
  server_->start();
  ticker_ = std::thread([this] {
    nameThisThread("dhd-ticker");
    tickerLoop();
  });
}

std::uint16_t DriverService::port() const { return server_ ? server_->port() : 0; }

void DriverService::stop() {
  if (stopped_.exchange(true)) return;
  {
    std::lock_guard lock(ticker_mutex_);
    stopping_ = true;
  }
  ticker_cv_.notify_all();
  if (ticker_.joinable()) ticker_.join();
  result_fetcher_.stop();  // its callbacks reach agents through the server
  if (server_) server_->stop();
}

// ---- the run command's side -----------------------------------------------------------------

void DriverService::submit(JobSpec job) {
  std::lock_guard lock(mutex_);
  Actions actions;
  scheduler_.submit(std::move(job), now_(), actions);
  if (event_log_) event_log_->jobStarted(scheduler_.job(), scheduler_.tasks());
  apply(actions);
  changed_.notify_all();
}

void DriverService::endJob(std::chrono::milliseconds wall,
                           const std::function<void(const JobReportView&)>& fn) {
  std::lock_guard lock(mutex_);
  const Progress progress = scheduler_.progress();
  const JobReportView report{.job = scheduler_.job(),
                             .state = scheduler_.jobState(),
                             .progress = progress,
                             .failure_reason = scheduler_.failureReason(),
                             .wall = wall,
                             .tasks = scheduler_.tasks(),
                             .agent_peaks = scheduler_.jobAgentPeaks()};
  if (event_log_) event_log_->jobEnded(report);
  fn(report);
}

void DriverService::agentGone(const std::string& agent_id, const std::string& reason) {
  if (event_log_) event_log_->agentRemoved(agent_id, reason);
}

void DriverService::cancel(const std::string& reason) {
  std::lock_guard lock(mutex_);
  Actions actions;
  scheduler_.cancel(reason, actions);
  apply(actions);
  changed_.notify_all();
}

JobState DriverService::waitForJob(TimePoint deadline) {
  std::unique_lock lock(mutex_);
  changed_.wait_until(lock, deadline, [&] { return scheduler_.jobState() != JobState::kRunning; });
  return scheduler_.jobState();
}

std::size_t DriverService::waitForAgents(std::size_t count, TimePoint deadline) {
  std::unique_lock lock(mutex_);
  changed_.wait_until(lock, deadline, [&] { return scheduler_.agents().size() >= count; });
  return scheduler_.agents().size();
}

std::size_t DriverService::waitForDecommissions(TimePoint deadline) {
  auto leaving = [&] {
    const auto& agents = scheduler_.agents();
    return static_cast<std::size_t>(std::count_if(agents.begin(), agents.end(), [](const auto& a) {
      return a.second.state == AgentState::kDecommissioning;
    }));
  };
  std::unique_lock lock(mutex_);
  changed_.wait_until(lock, deadline, [&] { return leaving() == 0; });
  return leaving();
}

std::size_t DriverService::waitForKills(TimePoint deadline) {
  std::unique_lock lock(mutex_);
  changed_.wait_until(lock, deadline, [&] { return scheduler_.killsUnanswered() == 0; });
  return scheduler_.killsUnanswered();
}

std::size_t DriverService::stopAgents() {
  std::lock_guard lock(mutex_);
  for (const auto& [id, connection] : agent_connections_) {
    connection->send(protocol::makeMessage(protocol::StopExecutor{}));
    told_to_stop_.insert(id);
  }
  return agent_connections_.size();
}

bool DriverService::decommission(const std::string& executor_id, const std::string& reason) {
  std::lock_guard lock(mutex_);
  auto it = agent_connections_.find(executor_id);
  if (it == agent_connections_.end() || scheduler_.agent(executor_id) == nullptr) return false;
  protocol::DecommissionExecutor message;
  message.reason = reason;
  it->second->send(protocol::makeMessage(message));
  markDecommissioning(executor_id, "the driver asked it: " + reason);
  changed_.notify_all();
  return true;
}

void DriverService::markDecommissioning(const std::string& agent_id, const std::string& why) {
  const AgentInfo* agent = scheduler_.agent(agent_id);
  if (agent == nullptr || agent->state == AgentState::kDecommissioning) return;
  scheduler_.decommissionAgent(agent_id);
  logger("driver")->info("agent '{}' is decommissioning ({}): no new tasks go to it", agent_id,
                         why);
  if (event_log_) event_log_->agentDecommissioning(agent_id, why);
}

void DriverService::inspect(const std::function<void(const Scheduler&)>& fn) const {
  std::lock_guard lock(mutex_);
  fn(scheduler_);
}

ServiceCounters DriverService::counters() const {
  std::lock_guard lock(mutex_);
  return ServiceCounters{.frames = metrics_.frames(),
                         .bad_frames = metrics_.badFrames(),
                         .registrations = metrics_.registrations(),
                         .refused_registrations = metrics_.refusedRegistrations(),
                         .agents_lost = metrics_.agentsLost(),
                         .stray_updates = scheduler_.strayUpdates(),
                         .auth_failures = metrics_.authFailures()};
}

void DriverService::apply(Actions& actions) {
  for (auto& action : actions) {
    auto it = agent_connections_.find(action.agent_id);
    if (it == agent_connections_.end()) continue;
    Connection& c = *it->second;
    switch (action.kind) {
      case Action::Kind::kLaunch:
        metrics_.launched(action.waited, action.ahead);
        if (event_log_) {
          if (auto index = scheduler_.runningIndex(action.task.task_id)) {
            event_log_->taskStarted(scheduler_.job().name, *index, action.task, action.agent_id,
                                    action.ahead);
          }
        }
        c.send(protocol::LaunchTask{.task = std::move(action.task)});
        break;
      case Action::Kind::kKill: {
        if (action.recall) {
          metrics_.recalled();
          logger("driver")->debug("task {} on '{}': {}", action.task_id, action.agent_id,
                                  action.reason);
        }
        protocol::KillTask kill;
        kill.task_id = action.task_id;
        kill.executor_id = action.agent_id;
        kill.interrupt = true;
        kill.reason = action.reason;
        c.send(protocol::makeMessage(kill));
        break;
      }
      case Action::Kind::kDisconnect:
        if (const AgentInfo* held = scheduler_.agent(action.agent_id);
            held != nullptr && held->disconnected_since) {
          logHeld(action.agent_id, action.reason);  // silent, but it may come back
        } else {
          logger("driver")->warn("agent '{}' lost: {}; its tasks are rescheduled", action.agent_id,
                                 action.reason);
          agentGone(action.agent_id, "lost: " + action.reason);
          metrics_.agentLost();
        }
        c.close(action.reason);
        agent_connections_.erase(it);
        break;
    }
  }
}

// ---- heartbeats and expiry --------------------------------------------------------------------

void DriverService::wakeTicker(bool deadline_nearer) {
  bool wake = false;
  {
    std::lock_guard lock(ticker_mutex_);
    agent_came_ = true;
    deadline_nearer_ = deadline_nearer_ || deadline_nearer;
    wake = ticker_idle_ || deadline_nearer;
  }
  if (wake) ticker_cv_.notify_all();
}

void DriverService::tickerLoop() {
  using std::chrono::milliseconds;
  const auto heartbeat_every = milliseconds(config_.heartbeat_interval_ms);
  auto next_heartbeat = SteadyClock::now() + heartbeat_every;
  for (;;) {
    {
      std::unique_lock lock(ticker_mutex_);
      agent_came_ = false;
      deadline_nearer_ = false;
    }
    std::optional<SteadyClock::time_point> next_expiry;
    {
      std::lock_guard lock(mutex_);
      // The scheduler's clock may be another than the ticker's: wait for the same distance.
      if (auto due = scheduler_.nextExpiry()) {
        next_expiry = SteadyClock::now() + std::max(SteadyClock::duration::zero(), *due - now_());
      }
    }
    if (!next_expiry) {
      // Nothing to heartbeat or expire: sleep until an agent registers (no timer while idle).
      std::unique_lock lock(ticker_mutex_);
      ticker_idle_ = true;
      ticker_cv_.wait(lock, [&] { return stopping_ || agent_came_; });
      ticker_idle_ = false;
      if (stopping_) return;
      next_heartbeat = SteadyClock::now() + heartbeat_every;
      continue;
    }
    {
      // Wakes for the next heartbeat or the next agent due to expire, whichever is first, or
      // early when a held agent's grace window may end sooner.
      std::unique_lock lock(ticker_mutex_);
      if (ticker_cv_.wait_until(lock, std::min(next_heartbeat, *next_expiry),
                                [&] { return stopping_ || deadline_nearer_; })) {
        if (stopping_) return;
        continue;
      }
    }
    const auto now = SteadyClock::now();
    if (now >= next_heartbeat) {
      next_heartbeat = now + heartbeat_every;
      std::lock_guard lock(mutex_);
      protocol::Heartbeat beat;
      beat.sent_at_ms = wallClockMs();
      const std::string frame = protocol::encodeEnvelope(protocol::makeMessage(beat));
      for (const auto& [id, connection] : agent_connections_) connection->send(frame);
    }
    if (now >= *next_expiry) {
      std::lock_guard lock(mutex_);
      Actions actions;
      const TimePoint at = now_();
      const bool silent = !scheduler_.expireSilentAgents(at, actions).empty();
      const std::vector<std::string> gone = scheduler_.expireDisconnected(at, actions);
      for (const auto& id : gone) {
        logger("driver")->warn("agent '{}' lost: not back within {} ms; its tasks are rescheduled",
                               id, config_.agent_reconnect_grace_ms);
        agentGone(id, fmt::format("lost: not back within {} ms", config_.agent_reconnect_grace_ms));
        metrics_.agentLost();
      }
      if (silent || !gone.empty()) {
        apply(actions);
        changed_.notify_all();
      }
    }
  }
}

}  // namespace dockhand::driver
