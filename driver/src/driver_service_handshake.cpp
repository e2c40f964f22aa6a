// DriverService's side of the Hello handshake: the protocol version check and, with a cluster
// secret, the mutual proof (the agent's in Hello and Authenticate, the driver's in its Hello
// reply). A peer that fails it is refused with auth_failed, counted and closed. Runs on the
// connection's reader thread; it touches only that connection's handshake fields and the
// auth failure count (metrics_, atomic), never the scheduler.
#include "dockhand/driver/driver_service.h"

#include <string>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "dockhand/base/logging.h"
#include "dockhand/protocol/auth.h"

namespace dockhand::driver {

namespace ec = protocol::error_code;

void DriverService::handleHello(const std::shared_ptr<Connection>& c,
                                const protocol::Envelope& env) {
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
  logger("driver")->debug("connection {} ({}): Hello from {} {}", c->id(), c->peer(),
                          hello.role.empty() ? "peer" : hello.role, hello.software);
  if (!config_.secret) {
    // No secret here: an agent that asks for authentication sees no proof and refuses us.
    session(*c).greet();
    c->markGreeted();
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
  AgentSession& s = session(*c);
  s.startAuthentication(hello.auth->nonce, protocol::auth::randomNonce());
  reply.auth = protocol::HelloAuth{
      std::string(protocol::auth::kHelloScheme), s.driverNonce(),
      protocol::auth::helloProof(*config_.secret, "driver", s.agentNonce(), s.driverNonce())};
  c->send(protocol::makeReply(env.id, protocol::toJson(reply)));
}

void DriverService::handleAuthenticate(const std::shared_ptr<Connection>& c,
                                       const protocol::Envelope& env) {
  AgentSession& s = session(*c);
  auto authenticate = protocol::decodeBody<protocol::Authenticate>(env.body);
  if (!protocol::auth::checkHelloProof(*config_.secret, "agent", s.agentNonce(), s.driverNonce(),
                                       authenticate.proof)) {
    refuseAuth(*c, env.id,
               "the agent's proof does not match this driver's cluster secret: the agent holds "
               "another secret");
    return;
  }
  s.greet();
  c->markGreeted();
  c->send(protocol::makeReply(env.id, protocol::Json::object()));
  logger("driver")->debug("connection {} ({}): authenticated", c->id(), c->peer());
}

void DriverService::refuseBySession(Connection& c, std::uint64_t id,
                                    const SessionRefusal& refusal) {
  switch (refusal.kind) {
    case SessionRefusal::Kind::kIgnore:
      return;
    case SessionRefusal::Kind::kRefuse:
      refuse(c, id, refusal.code, refusal.message);
      return;
    case SessionRefusal::Kind::kClose:
      refuse(c, id, refusal.code, refusal.message);
      c.close(refusal.close_reason);
      return;
    case SessionRefusal::Kind::kAuthFail:
      refuseAuth(c, id, refusal.message);
      return;
  }
}

void DriverService::refuseAuth(Connection& c, std::uint64_t id, const std::string& why) {
  metrics_.authFailure();
  logger("driver")->warn("connection {} ({}): authentication failed, refused: {}", c.id(), c.peer(),
                         why);
  refuse(c, id, ec::kAuthFailed, why);
  c.close("authentication failed");
}

}  // namespace dockhand::driver
