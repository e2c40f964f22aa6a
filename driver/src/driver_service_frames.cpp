// DriverService's agent protocol: every frame an agent sends, checked (Hello first, the
// handshake done, the direction, an id on asks) and dispatched to the scheduler under mutex_,
// and the agent's registration, status updates, heartbeats, blocks and leaving. Runs on the
// reactor's thread (connection_reactor.h).
#include "dockhand/driver/driver_service.h"

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "dockhand/base/log_format.h"
#include "dockhand/base/logging.h"
#include "dockhand/protocol/task_frames.h"

namespace dockhand::driver {

namespace ec = protocol::error_code;
using protocol::MessageType;

namespace {

// The RemoveExecutor reason of an agent that decommissioned itself to the end: a clean leave.
constexpr std::string_view kDecommissionFinished = "decommission finished";

std::string describeDecommission(const DecommissionProgress& p) {
  return fmt::format("{}: {} of {} block(s) moved, {} left, {} failed; {} of {} bytes moved",
                     p.state.empty() ? "state unknown" : p.state, p.blocks_migrated,
                     p.blocksTotal(), p.blocks_left, p.blocks_failed, p.bytes_migrated,
                     p.bytesTotal());
}

std::string describeResources(const protocol::RegisterExecutor& reg) {
  std::string out;
  for (const auto& [name, info] : reg.resources) {
    out += fmt::format("{}{}={}", out.empty() ? "" : " ", name, info.addresses.size());
  }
  return out.empty() ? "none" : out;
}

}  // namespace

void DriverService::onOpen(const std::shared_ptr<Connection>& c) {
  c->context = std::make_unique<AgentSession>();
  logger("driver")->debug("connection {} from {}", c->id(), c->peer());
}

AgentSession& DriverService::session(Connection& c) {
  return static_cast<AgentSession&>(*c.context);
}

bool DriverService::onIdle(const std::shared_ptr<Connection>& c) {
  // A registered agent's silence is judged by the ticker (agent_timeout_ms); a connection
  // that greeted but never registered is simply closed.
  return session(*c).registered();
}

void DriverService::onDropped(const std::shared_ptr<Connection>& /*connection*/,
                              DropReason reason) {
  metrics_.connectionDropped(reason);
}

void DriverService::refuse(Connection& c, std::uint64_t id, std::string_view code,
                           std::string message) {
  metrics_.badFrame();
  logger("driver")->debug("connection {} ({}): refused a frame: {}: {}", c.id(), c.peer(), code,
                          message);
  if (id > 0) {
    c.send(protocol::makeErrorReply(id, code, std::move(message)));
  } else {
    c.send(protocol::makeError(code, std::move(message)));
  }
}

void DriverService::onFrame(const std::shared_ptr<Connection>& c, std::string_view frame) {
  metrics_.frame();
  // The frame every task ends with is read straight into its message (task_frames.h); any
  // other frame, and one that reader leaves, is decoded as an envelope and then its body.
  if (auto update = protocol::readStatusUpdateFrame(frame, config_.max_frame_bytes)) {
    const protocol::MessageSpec& spec = protocol::specOf(MessageType::kStatusUpdate);
    if (admits(*c, 0, spec, spec.name)) handleStatus(c, 0, std::move(*update));
    return;
  }
  protocol::DecodeResult decoded = protocol::decodeEnvelope(frame, config_.max_frame_bytes);
  if (!decoded) {
    const auto& error = decoded.error();
    refuse(*c, error.id, error.code, error.message);
    return;
  }
  protocol::Envelope& env = decoded.value();
  if (env.isReply()) {
    logger("driver")->debug("connection {}: reply to {} ignored (no ask of that id is pending)",
                            c->id(), env.re);
    return;
  }
  if (env.isError()) {
    if (env.error->code == ec::kAuthFailed && !session(*c).registered()) {
      metrics_.authFailure();
      logger("driver")->warn(
          "connection {} ({}): authentication failed: the agent refused this driver: {}", c->id(),
          c->peer(), env.error->message);
      c->close("authentication failed");
      return;
    }
    logger("driver")->warn("agent '{}' ({}) reported an error: {}: {}", session(*c).agentId(),
                           c->peer(), env.error->code, env.error->message);
    return;
  }
  const protocol::MessageSpec* spec = protocol::findMessage(env.type);
  if (spec == nullptr) {
    refuse(*c, env.id, ec::kUnknownType, fmt::format("unknown message type '{}'", env.type));
    return;
  }
  if (!admits(*c, env.id, *spec, env.type)) return;
  try {
    handle(c, env, *spec);
  } catch (const protocol::BodyError& e) {
    refuse(*c, env.id, ec::kInvalidBody,
           fmt::format("{} body: {}: {}", env.type, e.path(), e.detail()));
  }
}

bool DriverService::admits(Connection& c, std::uint64_t id, const protocol::MessageSpec& spec,
                           std::string_view type) {
  if (auto refusal = session(c).handshakeRefusal(spec.type, type)) {
    refuseBySession(c, id, *refusal);
    return false;
  }
  if (spec.direction == protocol::Direction::kDriverToAgent) {
    refuse(c, id, ec::kUnexpectedMessage, fmt::format("{} is sent by the driver, not to it", type));
    return false;
  }
  if (spec.ask && id == 0) {
    refuse(c, 0, ec::kMalformedFrame,
           fmt::format("{} is an ask and needs an id > 0 to answer", type));
    return false;
  }
  if (auto refusal = session(c).admit(spec.type, type, config_.secret.has_value())) {
    refuseBySession(c, id, *refusal);
    return false;
  }
  return true;
}

void DriverService::handle(const std::shared_ptr<Connection>& c, protocol::Envelope& env,
                           const protocol::MessageSpec& spec) {
  switch (spec.type) {
    case MessageType::kHello:
      handleHello(c, env);
      return;
    case MessageType::kAuthenticate:
      handleAuthenticate(c, env);
      return;
    case MessageType::kRetrieveAppConfig: {
      protocol::decodeBody<protocol::RetrieveAppConfig>(env.body);
      c->send(protocol::makeReply(env.id, protocol::toJson(app_config_)));
      return;
    }
    case MessageType::kRegisterExecutor:
      handleRegister(c, env);
      return;
    case MessageType::kResumeExecutor:
      handleResume(c, env);
      return;
    case MessageType::kStatusUpdate:
      handleStatus(c, env.id, protocol::decodeBody<protocol::StatusUpdate>(env.body));
      return;
    default:
      break;
  }
  const std::string& agent_id = session(*c).agentId();
  switch (spec.type) {
    case MessageType::kLaunchedExecutor: {
      auto launched = protocol::decodeBody<protocol::LaunchedExecutor>(env.body);
      if (launched.executor_id != agent_id) {
        refuse(*c, env.id, ec::kInvalidBody,
               fmt::format("LaunchedExecutor names '{}' but this connection registered '{}'",
                           launched.executor_id, agent_id));
        return;
      }
      std::lock_guard lock(mutex_);
      Actions actions;
      scheduler_.agentLaunched(agent_id, now_(), actions);
      apply(actions);
      logger("driver")->info("agent '{}' is ready for tasks", agent_id);
      return;
    }
    case MessageType::kHeartbeat:
      handleHeartbeat(c, env);
      return;
    case MessageType::kGetPeers: {
      protocol::decodeBody<protocol::GetPeers>(env.body);
      std::vector<protocol::Peer> peers;
      {
        std::lock_guard lock(mutex_);
        scheduler_.touch(agent_id, now_());
        peers = scheduler_.peersFor(agent_id);
      }
      logger("driver")->debug("agent '{}' asked for peers: {} offered", agent_id, peers.size());
      c->send(protocol::makeReply(env.id, protocol::toJson(peers)));
      return;
    }
    case MessageType::kUpdateBlockInfo: {
      auto update = protocol::decodeBody<protocol::UpdateBlockInfo>(env.body);
      std::lock_guard lock(mutex_);
      const TimePoint now = now_();
      scheduler_.touch(agent_id, now);
      const JobState before = scheduler_.jobState();
      Actions actions;
      scheduler_.updateBlocks(agent_id, update, now, actions);
      if (event_log_) event_log_->blocksUpdated(agent_id, update);
      apply(actions);
      logger("driver")->debug("agent '{}': {} block(s) added, {} removed", agent_id,
                              update.added.size(), update.removed.size());
      if (scheduler_.jobState() != before) changed_.notify_all();
      return;
    }
    case MessageType::kRemoveExecutor: {
      auto removal = protocol::decodeBody<protocol::RemoveExecutor>(env.body);
      std::lock_guard lock(mutex_);
      if (auto it = agent_connections_.find(agent_id);
          it != agent_connections_.end() && it->second == c) {
        agent_connections_.erase(it);
      }
      const bool clean = removal.reason == kDecommissionFinished;
      const std::size_t held = scheduler_.blocks().heldBy(agent_id);
      Actions actions;
      scheduler_.removeAgent(agent_id, "removed itself: " + removal.reason, actions);
      agentGone(agent_id, "removed itself: " + removal.reason);
      apply(actions);
      if (clean) {
        logger("driver")->info(
            "agent '{}' finished decommissioning and left ({} block(s) still listed on "
            "it went with it)",
            agent_id, held);
      } else {
        logger("driver")->info("agent '{}' removed itself: {}", agent_id,
                               removal.reason.empty() ? "no reason given" : removal.reason);
      }
      session(*c).unbind();
      changed_.notify_all();
      return;
    }
    case MessageType::kExecutorDecommissioning: {
      protocol::decodeBody<protocol::ExecutorDecommissioning>(env.body);
      {
        std::lock_guard lock(mutex_);
        scheduler_.touch(agent_id, now_());
        markDecommissioning(agent_id, "it said ExecutorDecommissioning");
        changed_.notify_all();
      }
      c->send(protocol::makeReply(env.id, protocol::Json{{"accepted", true}}));
      return;
    }
    default:
      refuse(*c, env.id, ec::kUnexpectedMessage,
             fmt::format("{} is not expected from an agent", env.type));
      return;
  }
}

void DriverService::handleRegister(const std::shared_ptr<Connection>& c,
                                   const protocol::Envelope& env) {
  auto reg = protocol::decodeBody<protocol::RegisterExecutor>(env.body);
  Result<void> result;
  {
    std::lock_guard lock(mutex_);
    Actions actions;
    if (const AgentInfo* held = scheduler_.agent(reg.executor_id);
        held != nullptr && held->disconnected_since) {
      // It came back as a new agent (restarted, or it could not resume): what the held one ran
      // and stored is gone with the old process.
      scheduler_.removeAgent(reg.executor_id, "registered anew instead of resuming", actions);
      agentGone(reg.executor_id, "lost: registered anew instead of resuming");
      metrics_.agentLost();
      logger("driver")->warn(
          "agent '{}' lost: it registered anew instead of resuming; its tasks are rescheduled",
          reg.executor_id);
    }
    result = scheduler_.registerAgent(reg, now_(), actions);
    if (result) {
      metrics_.registration();
      wakeTicker(/*deadline_nearer=*/false);
      agent_connections_[reg.executor_id] = c;
      if (const AgentInfo* added = scheduler_.agent(reg.executor_id); added && event_log_) {
        event_log_->agentAdded(*added);
      }
      // The reply goes out before anything the registration leads to.
      c->send(protocol::makeReply(env.id, protocol::Json::object()));
      apply(actions);
      changed_.notify_all();
    } else {
      metrics_.refusedRegistration();
    }
  }
  if (!result) {
    logger("driver")->warn("refused registration from {}: {}", c->peer(), result.error().message);
    refuse(*c, env.id, result.error().code, result.error().message);
    return;
  }
  session(*c).bind(reg.executor_id);
  logger("driver")->info("agent '{}' registered from {} ({}): {} cores, resources: {}",
                         reg.executor_id, reg.hostname, c->peer(), reg.cores,
                         describeResources(reg));
}

void DriverService::handleResume(const std::shared_ptr<Connection>& c,
                                 const protocol::Envelope& env) {
  auto resume = protocol::decodeBody<protocol::ResumeExecutor>(env.body);
  std::optional<Error> refusal;
  std::size_t tasks = 0;
  std::size_t blocks = 0;
  std::shared_ptr<Connection> replaced;
  {
    std::lock_guard lock(mutex_);
    Actions actions;
    if (auto old = agent_connections_.find(resume.executor_id);
        old != agent_connections_.end() && old->second != c &&
        scheduler_.disconnectAgent(resume.executor_id, "replaced by a new connection", now_(),
                                   actions)) {
      // The agent gave up a connection whose end this side has not seen yet (a partition, a
      // silent peer): the new one takes its place; the old one is closed below.
      replaced = old->second;
      agent_connections_.erase(old);
    }
    Result<protocol::ResumeAccepted> result = scheduler_.resumeAgent(resume, now_(), actions);
    if (result) {
      // Bound to the agent as a registration and its LaunchedExecutor would: it is active.
      agent_connections_[resume.executor_id] = c;
      session(*c).bind(resume.executor_id);
      tasks = result->tasks.size();
      blocks = scheduler_.blocks().heldBy(resume.executor_id);
      // The reply goes out before the kills and launches the resume leads to.
      c->send(protocol::makeReply(env.id, protocol::toJson(*result)));
      apply(actions);
      changed_.notify_all();
    } else {
      refusal = result.error();
    }
  }
  if (replaced) replaced->close("replaced by the agent's new connection");
  if (refusal) {
    logger("driver")->warn("refused ResumeExecutor from {}: {}", c->peer(), refusal->message);
    refuse(*c, env.id, refusal->code, refusal->message);
    c->close("not resumable");
    return;
  }
  logger("driver")->info("agent '{}' resumed from {}: {} task(s), {} block(s)", resume.executor_id,
                         c->peer(), tasks, blocks);
}

void DriverService::logHeld(const std::string& agent_id, const std::string& why) const {
  const AgentInfo* agent = scheduler_.agent(agent_id);
  if (agent == nullptr) return;
  logger("driver")->warn(
      "agent '{}' disconnected ({}); holding its {} task(s) and {} block(s) for {} ms", agent_id,
      why, agent->running, scheduler_.blocks().heldBy(agent_id),
      scheduler_.reconnectGrace().count());
}

void DriverService::handleStatus(const std::shared_ptr<Connection>& c, std::uint64_t id,
                                 protocol::StatusUpdate update) {
  const std::string& agent_id = session(*c).agentId();
  if (update.executor_id != agent_id) {
    refuse(*c, id, ec::kInvalidBody,
           fmt::format("StatusUpdate names executor '{}' but this connection registered '{}'",
                       update.executor_id, agent_id));
    return;
  }
  const TaskLogScope scope(update.task_id, agent_id);
  const auto level = log_task_updates ? spdlog::level::info : spdlog::level::debug;
  if (logger("driver")->should_log(level)) {
    logger("driver")->log(level, "task {} on '{}': {}{}{}", update.task_id, agent_id,
                          protocol::toString(update.state), update.reason.empty() ? "" : ": ",
                          update.reason);
  }
  if (update.state == protocol::TaskState::kFinished && update.result.is_object() &&
      update.result.contains("block") && fetchResultBlock(agent_id, update)) {
    return;
  }
  applyStatus(agent_id, std::move(update));
}

void DriverService::handleHeartbeat(const std::shared_ptr<Connection>& c,
                                    const protocol::Envelope& env) {
  auto beat = protocol::decodeBody<protocol::Heartbeat>(env.body);
  const std::string& agent_id = session(*c).agentId();
  metrics_.heartbeat();
  std::lock_guard lock(mutex_);
  scheduler_.touch(agent_id, now_());
  scheduler_.noteAgentMetrics(agent_id, beat.metrics);
  if (beat.decommission.is_null()) {
    scheduler_.noteDecommissionProgress(agent_id, beat.decommission);
    return;
  }
  // Progress means it decommissions, whoever started it (SIGPWR, the driver).
  markDecommissioning(agent_id, "its heartbeat reports a decommission");
  if (scheduler_.noteDecommissionProgress(agent_id, beat.decommission)) {
    logger("driver")->info(
        "agent '{}' decommission {}", agent_id,
        describeDecommission(parseDecommissionProgress(agent_id, beat.decommission)));
  }
}

void DriverService::onClose(const std::shared_ptr<Connection>& c, const std::string& why) {
  const std::string& agent_id = session(*c).agentId();
  if (agent_id.empty()) {
    logger("driver")->debug("connection {} ({}) closed: {}", c->id(), c->peer(), why);
    return;
  }
  std::lock_guard lock(mutex_);
  auto it = agent_connections_.find(agent_id);
  if (it == agent_connections_.end() || it->second != c) return;  // already dropped
  agent_connections_.erase(it);
  Actions actions;
  if (told_to_stop_.erase(agent_id) > 0) {
    scheduler_.removeAgent(agent_id, "stopped by the driver", actions);
    agentGone(agent_id, "stopped by the driver");
    logger("driver")->info("agent '{}' stopped", agent_id);
  } else if (scheduler_.disconnectAgent(agent_id, "connection closed: " + why, now_(), actions)) {
    logHeld(agent_id, "connection closed: " + why);
    wakeTicker(/*deadline_nearer=*/true);  // its grace window may end before the next wake
  } else if (scheduler_.removeAgent(agent_id, "connection closed: " + why, actions)) {
    agentGone(agent_id, "lost: connection closed: " + why);
    metrics_.agentLost();
    logger("driver")->warn("agent '{}' lost: connection closed ({}); its tasks are rescheduled",
                           agent_id, why);
  }
  apply(actions);
  changed_.notify_all();
}

}  // namespace dockhand::driver
