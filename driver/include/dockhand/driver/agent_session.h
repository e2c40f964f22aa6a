// AgentSession: one agent connection's protocol session as the driver sees it (docs/protocol.md
// 6): Hello first (and, when the driver holds a cluster secret, Authenticate over the two
// nonces), then RegisterExecutor or ResumeExecutor binds it to an agent id, until the agent
// removes itself (RemoveExecutor). The state is explicit and moves only through move(), checked
// against canMove(); what each state lets a frame do is admit(), written once.
//
// Pure (no I/O, no lock): DriverService keeps one with each connection (Connection::context)
// and touches it only on that connection's reader thread, so it needs none.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "dockhand/driver/agent_server.h"
#include "dockhand/protocol/messages.h"

namespace dockhand::driver {

enum class SessionState {
  kOpened,          // nothing said yet: Hello must come first
  kAuthenticating,  // Hello answered with the driver's proof: Authenticate must come next
  kGreeted,         // the handshake is done: the agent may register or resume
  kRegistered,      // bound to agentId()
};
std::string_view toString(SessionState state);
bool canMove(SessionState from, SessionState to);

// Why a frame is not handled, and what then happens to the connection.
struct SessionRefusal {
  enum class Kind {
    kIgnore,   // dropped without an answer (a Heartbeat before registration)
    kRefuse,   // answered with an Error of `code`
    kClose,    // answered, then the connection is closed (`close_reason`)
    kAuthFail  // an authentication failure: answered, counted, and closed
  };
  Kind kind = Kind::kRefuse;
  std::string_view code;
  std::string message;
  std::string close_reason;
};

class AgentSession final : public ConnectionContext {
 public:
  SessionState state() const { return state_; }
  bool registered() const { return state_ == SessionState::kRegistered; }
  // The agent this connection is bound to; "" unless registered().
  const std::string& agentId() const { return agent_id_; }
  // The nonces of the handshake in progress (kAuthenticating).
  const std::string& agentNonce() const { return agent_nonce_; }
  const std::string& driverNonce() const { return driver_nonce_; }

  // What a frame of `type` (its wire name `name`) from the agent meets in this state, nullopt
  // when nothing stops it, in two steps: the handshake's order (Hello first, Authenticate right
  // after it when asked for), checked before anything else about the frame; then what the state
  // lets this type do (a second Hello or Authenticate, registering twice, a message that needs
  // a registration). `authenticates`: the driver holds a cluster secret.
  std::optional<SessionRefusal> handshakeRefusal(protocol::MessageType type,
                                                 std::string_view name) const;
  std::optional<SessionRefusal> admit(protocol::MessageType type, std::string_view name,
                                      bool authenticates) const;

  // The moves: Hello answered without a secret (kOpened -> kGreeted); Hello answered with the
  // driver's proof (kOpened -> kAuthenticating); the agent's proof accepted (kAuthenticating ->
  // kGreeted); a registration or resume accepted (kGreeted -> kRegistered); the agent removed
  // itself (kRegistered -> kGreeted). Each throws std::logic_error for a move canMove() does
  // not allow (a bug in the caller: admit() refuses the frames that would lead there).
  void greet();
  void startAuthentication(std::string agent_nonce, std::string driver_nonce);
  void bind(std::string agent_id);
  void unbind();

 private:
  void move(SessionState to);

  SessionState state_ = SessionState::kOpened;
  std::string agent_id_;
  std::string agent_nonce_;
  std::string driver_nonce_;
};

}  // namespace dockhand::driver
