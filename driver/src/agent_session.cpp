#include "dockhand/driver/agent_session.h"

#include <stdexcept>
#include <utility>

#include <fmt/format.h>

#include "dockhand/protocol/envelope.h"

namespace dockhand::driver {

namespace ec = protocol::error_code;
using protocol::MessageType;

std::string_view toString(SessionState state) {
  switch (state) {
    case SessionState::kOpened:
      return "opened";
    case SessionState::kAuthenticating:
      return "authenticating";
    case SessionState::kGreeted:
      return "greeted";
    case SessionState::kRegistered:
      return "registered";
  }
  return "?";
}

bool canMove(SessionState from, SessionState to) {
  switch (to) {
    case SessionState::kOpened:
      return false;
    case SessionState::kAuthenticating:
      return from == SessionState::kOpened;
    case SessionState::kGreeted:
      return from == SessionState::kOpened || from == SessionState::kAuthenticating ||
             from == SessionState::kRegistered;
    case SessionState::kRegistered:
      return from == SessionState::kGreeted;
  }
  return false;
}

std::optional<SessionRefusal> AgentSession::handshakeRefusal(MessageType type,
                                                             std::string_view name) const {
  using Kind = SessionRefusal::Kind;
  if (state_ == SessionState::kAuthenticating && type != MessageType::kAuthenticate) {
    return SessionRefusal{
        .kind = Kind::kAuthFail,
        .code = ec::kAuthFailed,
        .message = fmt::format(
            "this driver requires authentication: Authenticate must follow Hello, got {}", name),
        .close_reason = "authentication failed"};
  }
  if (state_ == SessionState::kOpened && type != MessageType::kHello) {
    return SessionRefusal{.kind = Kind::kClose,
                          .code = ec::kUnexpectedMessage,
                          .message = fmt::format("the first frame must be Hello, got {}", name),
                          .close_reason = "no Hello first"};
  }
  return std::nullopt;
}

std::optional<SessionRefusal> AgentSession::admit(MessageType type, std::string_view name,
                                                  bool authenticates) const {
  using Kind = SessionRefusal::Kind;
  const auto refuse = [](std::string_view code, std::string message) {
    return SessionRefusal{
        .kind = Kind::kRefuse, .code = code, .message = std::move(message), .close_reason = {}};
  };
  switch (type) {
    case MessageType::kHello:
      if (state_ != SessionState::kOpened) {
        return refuse(ec::kUnexpectedMessage, "Hello was already exchanged on this connection");
      }
      return std::nullopt;
    case MessageType::kAuthenticate:
      if (state_ != SessionState::kAuthenticating) {
        return refuse(ec::kUnexpectedMessage,
                      authenticates
                          ? "Authenticate was already accepted on this connection"
                          : "this driver does not authenticate (it has no auth_secret_file)");
      }
      return std::nullopt;
    case MessageType::kRetrieveAppConfig:
      return std::nullopt;  // any time after the handshake
    case MessageType::kRegisterExecutor:
    case MessageType::kResumeExecutor:
      if (registered()) {
        return refuse(ec::kUnexpectedMessage,
                      fmt::format("this connection is already registered as '{}'", agent_id_));
      }
      return std::nullopt;
    default:
      break;
  }
  if (registered()) return std::nullopt;
  if (type == MessageType::kHeartbeat) {
    // Harmless before registration.
    return SessionRefusal{.kind = Kind::kIgnore, .code = {}, .message = {}, .close_reason = {}};
  }
  return refuse(ec::kNotRegistered, fmt::format("{} before RegisterExecutor was accepted", name));
}

void AgentSession::move(SessionState to) {
  if (!canMove(state_, to)) {
    throw std::logic_error(
        fmt::format("agent session: no move from {} to {}", toString(state_), toString(to)));
  }
  state_ = to;
}

void AgentSession::greet() {
  move(SessionState::kGreeted);
  agent_nonce_.clear();
  driver_nonce_.clear();
}

void AgentSession::startAuthentication(std::string agent_nonce, std::string driver_nonce) {
  move(SessionState::kAuthenticating);
  agent_nonce_ = std::move(agent_nonce);
  driver_nonce_ = std::move(driver_nonce);
}

void AgentSession::bind(std::string agent_id) {
  move(SessionState::kRegistered);
  agent_id_ = std::move(agent_id);
}

void AgentSession::unbind() {
  move(SessionState::kGreeted);
  agent_id_.clear();
}

}  // namespace dockhand::driver
