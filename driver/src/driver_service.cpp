#include "dockhand/driver/driver_service.h"

#include <algorithm>
#include <chrono>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "dockhand/driver/driver_log.h"

#ifndef DOCKHAND_VERSION
#define DOCKHAND_VERSION "0.0.0"
#endif

namespace dockhand::driver {

namespace ec = protocol::error_code;
using protocol::MessageType;

namespace {

std::uint64_t wallClockMs() {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                        std::chrono::system_clock::now().time_since_epoch())
                                        .count());
}

// The RemoveExecutor reason of an agent that decommissioned itself to the end: a clean leave.
constexpr std::string_view kDecommissionFinished = "decommission finished";

std::string describeDecommission(const DecommissionProgress& p) {
  const std::uint64_t blocks_left =
      p.blocks_total - std::min(p.blocks_total, p.blocks_migrated + p.blocks_failed);
  return fmt::format("{}: {} of {} block(s) moved, {} left, {} failed; {} of {} bytes moved",
                     p.state.empty() ? "state unknown" : p.state, p.blocks_migrated, p.blocks_total,
                     blocks_left, p.blocks_failed, p.bytes_migrated, p.bytes_total);
}

HttpReply jsonReply(int status, const Json& body) {
  return HttpReply{status, "application/json", body.dump() + "\n", {}};
}

HttpReply errorReply(int status, const std::string& message) {
  return jsonReply(status, Json{{"error", message}});
}

std::string describeResources(const protocol::RegisterExecutor& reg) {
  std::string out;
  for (const auto& [name, info] : reg.resources) {
    out += fmt::format("{}{}={}", out.empty() ? "" : " ", name, info.addresses.size());
  }
  return out.empty() ? "none" : out;
}

}  // namespace

std::string driverSoftware() { return std::string("dockhand-driver ") + DOCKHAND_VERSION; }

DriverService::DriverService(DriverConfig config, std::function<TimePoint()> now)
    : config_(std::move(config)),
      now_(std::move(now)),
      scheduler_(SchedulerOptions{config_.max_attempts, Millis(config_.agent_timeout_ms)}) {
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
  ticker_ = std::thread([this] { tickerLoop(); });
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
  if (server_) server_->stop();
}

// ---- the run command's side -----------------------------------------------------------------

void DriverService::submit(JobSpec job) {
  std::lock_guard lock(mutex_);
  Actions actions;
  scheduler_.submit(std::move(job), now_(), actions);
  apply(actions);
  changed_.notify_all();
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

Json DriverService::executorsJson() const {
  std::lock_guard lock(mutex_);
  Json list = Json::array();
  for (const auto& [id, agent] : scheduler_.agents()) {
    list.push_back({{"executor_id", id},
                    {"host", agent.host},
                    {"state", std::string(toString(agent.state))},
                    {"cores", agent.cores},
                    {"free_cores", agent.free_cores},
                    {"running_tasks", agent.running},
                    {"tasks_launched", agent.tasks_launched},
                    {"block_url", agent.block_url},
                    {"blocks", scheduler_.blocksHeldBy(id)},
                    {"decommission", agent.decommission}});
  }
  return Json{
      {"executors", std::move(list)},
      {"fallback_blocks", scheduler_.blocksHeldBy("")},
      {"blocks", scheduler_.blocks().size()},
      {"auth", {{"required", config_.secret.has_value()}, {"failures", auth_failures_.load()}}}};
}

std::optional<HttpReply> DriverService::onHttpRequest(const ControlRequest& request) {
  constexpr std::string_view kExecutors = "/v1/executors";
  constexpr std::string_view kDecommission = "/decommission";
  const std::string& method = request.method;
  const std::string& path = request.path;
  const std::string& body = request.body;
  if (path.rfind("/v1/", 0) != 0) return std::nullopt;
  if (control_verifier_) {
    auto refusal = control_verifier_->verify(request.authorization,
                                             protocol::auth::RequestToSign{method, path, body},
                                             protocol::auth::wallClockMs());
    if (refusal) {
      ++auth_failures_;
      driverLogger()->warn("control request {} {} refused: {}", method, path, *refusal);
      HttpReply reply = errorReply(401, *refusal);
      reply.headers.emplace_back("WWW-Authenticate", std::string(protocol::auth::kHeaderScheme));
      return reply;
    }
  }
  try {
    if (path == kExecutors || path == std::string(kExecutors) + "/") {
      if (method != "GET") return errorReply(405, "use GET /v1/executors");
      return jsonReply(200, executorsJson());
    }
    // "/v1/executors/<id>/decommission"
    const std::string prefix = std::string(kExecutors) + "/";
    if (path.size() > prefix.size() + kDecommission.size() && path.rfind(prefix, 0) == 0 &&
        path.compare(path.size() - kDecommission.size(), kDecommission.size(), kDecommission) ==
            0) {
      const std::string id =
          path.substr(prefix.size(), path.size() - prefix.size() - kDecommission.size());
      if (method != "POST") return errorReply(405, "use POST /v1/executors/<id>/decommission");
      std::string reason = "requested through the control API";
      if (!body.empty()) {
        Json parsed = Json::parse(body, nullptr, /*allow_exceptions=*/false);
        if (parsed.is_object() && parsed.contains("reason") && parsed["reason"].is_string()) {
          reason = parsed["reason"].get<std::string>();
        }
      }
      if (!decommission(id, reason)) {
        return errorReply(404, fmt::format("no executor '{}' is registered", id));
      }
      return jsonReply(200, Json{{"executor_id", id}, {"decommissioning", true}});
    }
    return errorReply(404, fmt::format("no such resource: {}", path));
  } catch (const std::exception& e) {
    return errorReply(500, e.what());
  }
}

void DriverService::markDecommissioning(const std::string& agent_id, const std::string& why) {
  const AgentInfo* agent = scheduler_.agent(agent_id);
  if (agent == nullptr || agent->state == AgentState::kDecommissioning) return;
  scheduler_.decommissionAgent(agent_id);
  driverLogger()->info("agent '{}' is decommissioning ({}): no new tasks go to it", agent_id, why);
}

void DriverService::inspect(const std::function<void(const Scheduler&)>& fn) const {
  std::lock_guard lock(mutex_);
  fn(scheduler_);
}

ServiceCounters DriverService::counters() const {
  std::lock_guard lock(mutex_);
  ServiceCounters c;
  c.frames = frames_.load();
  c.bad_frames = bad_frames_.load();
  c.registrations = registrations_;
  c.refused_registrations = refused_registrations_;
  c.agents_lost = agents_lost_;
  c.stray_updates = scheduler_.strayUpdates();
  c.auth_failures = auth_failures_.load();
  return c;
}

// ---- frames -------------------------------------------------------------------------------

void DriverService::onOpen(const std::shared_ptr<Connection>& c) {
  driverLogger()->debug("connection {} from {}", c->id(), c->peer());
}

bool DriverService::onIdle(const std::shared_ptr<Connection>& c) {
  // A registered agent's silence is judged by the ticker (agent_timeout_ms); a connection
  // that greeted but never registered is simply closed.
  return !c->agent_id.empty();
}

void DriverService::refuse(Connection& c, std::uint64_t id, std::string_view code,
                           std::string message) {
  ++bad_frames_;
  driverLogger()->debug("connection {} ({}): refused a frame: {}: {}", c.id(), c.peer(), code,
                        message);
  if (id > 0) {
    c.send(protocol::makeErrorReply(id, code, std::move(message)));
  } else {
    c.send(protocol::makeError(code, std::move(message)));
  }
}

void DriverService::onFrame(const std::shared_ptr<Connection>& c, std::string_view frame) {
  ++frames_;
  protocol::DecodeResult decoded = protocol::decodeEnvelope(frame, config_.max_frame_bytes);
  if (!decoded) {
    const auto& error = decoded.error();
    refuse(*c, error.id, error.code, error.message);
    return;
  }
  protocol::Envelope& env = decoded.value();
  if (env.isReply()) {
    driverLogger()->debug("connection {}: reply to {} ignored (no ask of that id is pending)",
                          c->id(), env.re);
    return;
  }
  if (env.isError()) {
    if (env.error->code == ec::kAuthFailed && c->agent_id.empty()) {
      ++auth_failures_;
      driverLogger()->warn(
          "connection {} ({}): authentication failed: the agent refused this driver: {}", c->id(),
          c->peer(), env.error->message);
      c->close("authentication failed");
      return;
    }
    driverLogger()->warn("agent '{}' ({}) reported an error: {}: {}", c->agent_id, c->peer(),
                         env.error->code, env.error->message);
    return;
  }
  const protocol::MessageSpec* spec = protocol::findMessage(env.type);
  if (spec == nullptr) {
    refuse(*c, env.id, ec::kUnknownType, fmt::format("unknown message type '{}'", env.type));
    return;
  }
  if (c->auth_pending && spec->type != MessageType::kAuthenticate) {
    refuseAuth(*c, env.id,
               fmt::format("this driver requires authentication: Authenticate must follow Hello, "
                           "got {}",
                           env.type));
    return;
  }
  if (!c->greeted && !c->auth_pending && spec->type != MessageType::kHello) {
    refuse(*c, env.id, ec::kUnexpectedMessage,
           fmt::format("the first frame must be Hello, got {}", env.type));
    c->close("no Hello first");
    return;
  }
  if (spec->direction == protocol::Direction::kDriverToAgent) {
    refuse(*c, env.id, ec::kUnexpectedMessage,
           fmt::format("{} is sent by the driver, not to it", env.type));
    return;
  }
  if (spec->ask && env.id == 0) {
    refuse(*c, 0, ec::kMalformedFrame,
           fmt::format("{} is an ask and needs an id > 0 to answer", env.type));
    return;
  }
  try {
    handle(c, env, *spec);
  } catch (const protocol::BodyError& e) {
    refuse(*c, env.id, ec::kInvalidBody,
           fmt::format("{} body: {}: {}", env.type, e.path(), e.detail()));
  }
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
    case MessageType::kStatusUpdate:
      handleStatus(c, env);
      return;
    default:
      break;
  }
  if (c->agent_id.empty()) {
    if (spec.type == MessageType::kHeartbeat) return;  // harmless before registration
    refuse(*c, env.id, ec::kNotRegistered,
           fmt::format("{} before RegisterExecutor was accepted", env.type));
    return;
  }
  switch (spec.type) {
    case MessageType::kLaunchedExecutor: {
      auto launched = protocol::decodeBody<protocol::LaunchedExecutor>(env.body);
      if (launched.executor_id != c->agent_id) {
        refuse(*c, env.id, ec::kInvalidBody,
               fmt::format("LaunchedExecutor names '{}' but this connection registered '{}'",
                           launched.executor_id, c->agent_id));
        return;
      }
      std::lock_guard lock(mutex_);
      Actions actions;
      scheduler_.agentLaunched(c->agent_id, now_(), actions);
      apply(actions);
      driverLogger()->info("agent '{}' is ready for tasks", c->agent_id);
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
        scheduler_.touch(c->agent_id, now_());
        peers = scheduler_.peersFor(c->agent_id);
      }
      driverLogger()->debug("agent '{}' asked for peers: {} offered", c->agent_id, peers.size());
      c->send(protocol::makeReply(env.id, protocol::toJson(peers)));
      return;
    }
    case MessageType::kUpdateBlockInfo: {
      auto update = protocol::decodeBody<protocol::UpdateBlockInfo>(env.body);
      std::lock_guard lock(mutex_);
      const TimePoint now = now_();
      scheduler_.touch(c->agent_id, now);
      const JobState before = scheduler_.jobState();
      Actions actions;
      scheduler_.updateBlocks(c->agent_id, update, now, actions);
      apply(actions);
      driverLogger()->debug("agent '{}': {} block(s) added, {} removed", c->agent_id,
                            update.added.size(), update.removed.size());
      if (scheduler_.jobState() != before) changed_.notify_all();
      return;
    }
    case MessageType::kRemoveExecutor: {
      auto removal = protocol::decodeBody<protocol::RemoveExecutor>(env.body);
      std::lock_guard lock(mutex_);
      if (auto it = agent_connections_.find(c->agent_id);
          it != agent_connections_.end() && it->second == c) {
        agent_connections_.erase(it);
      }
      const bool clean = removal.reason == kDecommissionFinished;
      const std::size_t held = scheduler_.blocksHeldBy(c->agent_id);
      Actions actions;
      scheduler_.removeAgent(c->agent_id, "removed itself: " + removal.reason, actions);
      apply(actions);
      if (clean) {
        driverLogger()->info(
            "agent '{}' finished decommissioning and left ({} block(s) still listed on "
            "it went with it)",
            c->agent_id, held);
      } else {
        driverLogger()->info("agent '{}' removed itself: {}", c->agent_id,
                             removal.reason.empty() ? "no reason given" : removal.reason);
      }
      c->agent_id.clear();
      changed_.notify_all();
      return;
    }
    case MessageType::kExecutorDecommissioning: {
      protocol::decodeBody<protocol::ExecutorDecommissioning>(env.body);
      {
        std::lock_guard lock(mutex_);
        scheduler_.touch(c->agent_id, now_());
        markDecommissioning(c->agent_id, "it said ExecutorDecommissioning");
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

void DriverService::handleHello(const std::shared_ptr<Connection>& c,
                                const protocol::Envelope& env) {
  if (c->greeted || c->auth_pending) {
    refuse(*c, env.id, ec::kUnexpectedMessage, "Hello was already exchanged on this connection");
    return;
  }
  auto hello = protocol::decodeBody<protocol::Hello>(env.body);
  if (hello.protocol_version != protocol::kProtocolVersion) {
    refuse(*c, env.id, ec::kProtocolVersion,
           fmt::format("this driver speaks protocol version {}, the peer sent {}; upgrade the "
                       "older side",
                       protocol::kProtocolVersion, hello.protocol_version));
    c->close("protocol version mismatch");
    return;
  }
  protocol::Hello reply;
  reply.role = "driver";
  reply.software = driverSoftware();
  driverLogger()->debug("connection {} ({}): Hello from {} {}", c->id(), c->peer(),
                        hello.role.empty() ? "peer" : hello.role, hello.software);
  if (!config_.secret) {
    // No secret here: an agent that asks for authentication sees no proof and refuses us.
    c->greeted = true;
    c->send(protocol::makeReply(env.id, protocol::toJson(reply)));
    return;
  }
  if (!hello.auth) {
    refuseAuth(*c, env.id,
               "this driver requires authentication and the agent sent no proof: give the agent "
               "the cluster secret (auth_secret_file, --auth-secret-file)");
    return;
  }
  if (hello.auth->scheme != protocol::auth::kHelloScheme ||
      !protocol::auth::validNonce(hello.auth->nonce)) {
    refuseAuth(
        *c, env.id,
        fmt::format("unsupported authentication: scheme '{}' with a nonce of {} "
                    "characters (expected {} and 32 to 128 hex digits)",
                    hello.auth->scheme, hello.auth->nonce.size(), protocol::auth::kHelloScheme));
    return;
  }
  c->agent_nonce = hello.auth->nonce;
  c->driver_nonce = protocol::auth::randomNonce();
  c->auth_pending = true;
  reply.auth = protocol::HelloAuth{
      std::string(protocol::auth::kHelloScheme), c->driver_nonce,
      protocol::auth::helloProof(*config_.secret, "driver", c->agent_nonce, c->driver_nonce)};
  c->send(protocol::makeReply(env.id, protocol::toJson(reply)));
}

void DriverService::handleAuthenticate(const std::shared_ptr<Connection>& c,
                                       const protocol::Envelope& env) {
  if (!c->auth_pending) {
    refuse(*c, env.id, ec::kUnexpectedMessage,
           config_.secret ? "Authenticate was already accepted on this connection"
                          : "this driver does not authenticate (it has no auth_secret_file)");
    return;
  }
  auto authenticate = protocol::decodeBody<protocol::Authenticate>(env.body);
  if (!protocol::auth::checkHelloProof(*config_.secret, "agent", c->agent_nonce, c->driver_nonce,
                                       authenticate.proof)) {
    refuseAuth(*c, env.id,
               "the agent's proof does not match this driver's cluster secret: the agent holds "
               "another secret");
    return;
  }
  c->auth_pending = false;
  c->greeted = true;
  c->send(protocol::makeReply(env.id, protocol::Json::object()));
  driverLogger()->debug("connection {} ({}): authenticated", c->id(), c->peer());
}

void DriverService::refuseAuth(Connection& c, std::uint64_t id, const std::string& why) {
  ++auth_failures_;
  driverLogger()->warn("connection {} ({}): authentication failed, refused: {}", c.id(), c.peer(),
                       why);
  refuse(c, id, ec::kAuthFailed, why);
  c.close("authentication failed");
}

void DriverService::handleRegister(const std::shared_ptr<Connection>& c,
                                   const protocol::Envelope& env) {
  if (!c->agent_id.empty()) {
    refuse(*c, env.id, ec::kUnexpectedMessage,
           fmt::format("this connection is already registered as '{}'", c->agent_id));
    return;
  }
  auto reg = protocol::decodeBody<protocol::RegisterExecutor>(env.body);
  RegistrationResult result;
  {
    std::lock_guard lock(mutex_);
    Actions actions;
    result = scheduler_.registerAgent(reg, now_(), actions);
    if (result.ok) {
      ++registrations_;
      agent_connections_[reg.executor_id] = c;
      // The reply goes out before anything the registration leads to.
      c->send(protocol::makeReply(env.id, protocol::Json::object()));
      apply(actions);
      changed_.notify_all();
    } else {
      ++refused_registrations_;
    }
  }
  if (!result.ok) {
    driverLogger()->warn("refused registration from {}: {}", c->peer(), result.message);
    refuse(*c, env.id, result.code, result.message);
    return;
  }
  c->agent_id = reg.executor_id;
  driverLogger()->info("agent '{}' registered from {} ({}): {} cores, resources: {}",
                       reg.executor_id, reg.hostname, c->peer(), reg.cores, describeResources(reg));
}

void DriverService::handleStatus(const std::shared_ptr<Connection>& c,
                                 const protocol::Envelope& env) {
  if (c->agent_id.empty()) {
    refuse(*c, env.id, ec::kNotRegistered, "StatusUpdate before RegisterExecutor was accepted");
    return;
  }
  auto update = protocol::decodeBody<protocol::StatusUpdate>(env.body);
  if (update.executor_id != c->agent_id) {
    refuse(*c, env.id, ec::kInvalidBody,
           fmt::format("StatusUpdate names executor '{}' but this connection registered '{}'",
                       update.executor_id, c->agent_id));
    return;
  }
  const auto level = log_task_updates ? spdlog::level::info : spdlog::level::debug;
  if (driverLogger()->should_log(level)) {
    driverLogger()->log(level, "task {} on '{}': {}{}{}", update.task_id, c->agent_id,
                        protocol::toString(update.state), update.reason.empty() ? "" : ": ",
                        update.reason);
  }
  std::lock_guard lock(mutex_);
  const TimePoint now = now_();
  scheduler_.touch(c->agent_id, now);
  const JobState before = scheduler_.jobState();
  Actions actions;
  scheduler_.onStatusUpdate(c->agent_id, update, now, actions);
  apply(actions);
  if (scheduler_.jobState() != before) changed_.notify_all();
}

void DriverService::handleHeartbeat(const std::shared_ptr<Connection>& c,
                                    const protocol::Envelope& env) {
  auto beat = protocol::decodeBody<protocol::Heartbeat>(env.body);
  std::lock_guard lock(mutex_);
  scheduler_.touch(c->agent_id, now_());
  if (beat.decommission.is_null()) {
    scheduler_.noteDecommissionProgress(c->agent_id, beat.decommission);
    return;
  }
  // Progress means it decommissions, whoever started it (SIGPWR, the driver).
  markDecommissioning(c->agent_id, "its heartbeat reports a decommission");
  if (scheduler_.noteDecommissionProgress(c->agent_id, beat.decommission)) {
    driverLogger()->info(
        "agent '{}' decommission {}", c->agent_id,
        describeDecommission(parseDecommissionProgress(c->agent_id, beat.decommission)));
  }
}

void DriverService::onClose(const std::shared_ptr<Connection>& c, const std::string& why) {
  if (c->agent_id.empty()) {
    driverLogger()->debug("connection {} ({}) closed: {}", c->id(), c->peer(), why);
    return;
  }
  std::lock_guard lock(mutex_);
  auto it = agent_connections_.find(c->agent_id);
  if (it == agent_connections_.end() || it->second != c) return;  // already dropped
  agent_connections_.erase(it);
  Actions actions;
  if (told_to_stop_.erase(c->agent_id) > 0) {
    scheduler_.removeAgent(c->agent_id, "stopped by the driver", actions);
    driverLogger()->info("agent '{}' stopped", c->agent_id);
  } else if (scheduler_.removeAgent(c->agent_id, "connection closed: " + why, actions)) {
    ++agents_lost_;
    driverLogger()->warn("agent '{}' lost: connection closed ({}); its tasks are rescheduled",
                         c->agent_id, why);
  }
  apply(actions);
  changed_.notify_all();
}

void DriverService::apply(Actions& actions) {
  for (auto& action : actions) {
    auto it = agent_connections_.find(action.agent_id);
    if (it == agent_connections_.end()) continue;
    Connection& c = *it->second;
    switch (action.kind) {
      case Action::Kind::kLaunch:
        c.send(protocol::LaunchTask{std::move(action.task)});
        break;
      case Action::Kind::kKill: {
        protocol::KillTask kill;
        kill.task_id = action.task_id;
        kill.executor_id = action.agent_id;
        kill.interrupt = true;
        kill.reason = action.reason;
        c.send(protocol::makeMessage(kill));
        break;
      }
      case Action::Kind::kDisconnect:
        driverLogger()->warn("agent '{}' lost: {}; its tasks are rescheduled", action.agent_id,
                             action.reason);
        ++agents_lost_;
        c.close(action.reason);
        agent_connections_.erase(it);
        break;
    }
  }
}

// ---- heartbeats and expiry --------------------------------------------------------------------

void DriverService::tickerLoop() {
  using std::chrono::milliseconds;
  const auto heartbeat_every = milliseconds(config_.heartbeat_interval_ms);
  const auto check_every =
      std::min(milliseconds(1000), milliseconds(std::max(10L, config_.agent_timeout_ms / 4)));
  auto next_heartbeat = SteadyClock::now() + heartbeat_every;
  auto next_check = SteadyClock::now() + check_every;
  for (;;) {
    {
      std::unique_lock lock(ticker_mutex_);
      if (ticker_cv_.wait_until(lock, std::min(next_heartbeat, next_check),
                                [&] { return stopping_; })) {
        return;
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
    if (now >= next_check) {
      next_check = now + check_every;
      std::lock_guard lock(mutex_);
      Actions actions;
      if (!scheduler_.expireSilentAgents(now_(), actions).empty()) {
        apply(actions);
        changed_.notify_all();
      }
    }
  }
}

}  // namespace dockhand::driver
