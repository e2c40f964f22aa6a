// WebSocketLink's handshake: the Hello exchange that opens every connection to the driver and,
// with a cluster secret, the proofs both ways (docs/protocol.md section 3, docs/security.md).
// Runs on the link's I/O thread, before any frame reaches the core thread.
#include <string>

#include <Poco/Net/NetException.h>
#include <Poco/Net/WebSocket.h>

#include "dockhand/base/logging.h"
#include "rpc/websocket_link.h"

namespace dockhand::agent {

namespace proto = dockhand::protocol;
using Poco::Net::WebSocket;

namespace {

std::shared_ptr<spdlog::logger> handshakeLog() { return logger("link"); }

// A handshake failure that the same settings meet again: no point in trying again.
Error finalFailure(std::string message) { return Error(std::move(message), "", false); }
// One that another try may get past (a slow or restarting driver, a dropped connection).
Error passingFailure(std::string message) { return Error(std::move(message), "", true); }
// Either side refused the other's proof.
Error authFailure(std::string message) {
  return Error(std::move(message), std::string(proto::error_code::kAuthFailed), false);
}

}  // namespace

Result<proto::Envelope> WebSocketLink::receiveHandshakeFrame(WebSocket& ws) {
  if (reader_->buffered() == 0 && !ws.poll(Poco::Timespan(static_cast<Poco::Timespan::TimeDiff>(
                                                              options_.handshake_timeout.count()) *
                                                          1000),
                                           Poco::Net::Socket::SELECT_READ)) {
    return passingFailure("the driver did not answer within " +
                          std::to_string(options_.handshake_timeout.count()) + " ms");
  }
  std::vector<char> payload;
  net::ReceivedFrame frame = reader_->next(ws, payload);
  if (frame.end_of_stream ||
      (frame.flags & WebSocket::FRAME_OP_BITMASK) == WebSocket::FRAME_OP_CLOSE) {
    return passingFailure("the driver closed the connection during the handshake");
  }
  if (frame.discarded) {
    metrics_.decodeError();
    return finalFailure("the driver answered with a frame of " + std::to_string(frame.length) +
                        " bytes, over this agent's limit of " +
                        std::to_string(options_.max_frame_bytes) + " bytes (max_frame_bytes)");
  }
  auto decoded = proto::decodeEnvelope(std::string_view(payload.data(), payload.size()),
                                       options_.max_frame_bytes);
  if (decoded) metrics_.received(decoded->type);
  if (!decoded) {
    metrics_.decodeError();
    return finalFailure(
        "the peer did not answer with a protocol frame (is this a Dockhand driver?): " +
        decoded.error().message);
  }
  return std::move(decoded.value());
}

void WebSocketLink::refuseDriver(WebSocket& ws, const std::string& why) {
  try {
    std::string text =
        proto::encodeEnvelope(proto::makeError(proto::error_code::kAuthFailed, "agent: " + why));
    ws.sendFrame(text.data(), static_cast<int>(text.size()), WebSocket::FRAME_TEXT);
    ws.shutdown(WebSocket::WS_POLICY_VIOLATION, "authentication failed");
  } catch (const Poco::Exception&) {
    // the driver is gone already; the refusal is logged on this side anyway
  }
}

Result<void> WebSocketLink::handshake(WebSocket& ws) {
  const auto& secret = options_.secret;
  try {
    std::uint64_t id = next_id_++;
    proto::Hello hello{proto::kProtocolVersion, "agent", options_.software};
    std::string agent_nonce;
    if (secret) {
      agent_nonce = proto::auth::randomNonce();
      hello.auth = proto::HelloAuth{
          .scheme = std::string(proto::auth::kHelloScheme), .nonce = agent_nonce, .proof = ""};
    }
    std::string text = proto::encodeEnvelope(proto::makeMessage(hello, id));
    ws.sendFrame(text.data(), static_cast<int>(text.size()), WebSocket::FRAME_TEXT);
    metrics_.sent(proto::specOf(proto::Hello::kType).name);
    auto received = receiveHandshakeFrame(ws);
    if (!received) return received.error();
    if (!received->isReply() || received->re != id) {
      return finalFailure("the peer did not answer Hello with a Reply: is this a Dockhand driver?");
    }
    const proto::Envelope& reply = *received;
    if (!reply.ok) {
      if (reply.error->code == proto::error_code::kAuthFailed) {
        return authFailure("the driver refused this agent: " + reply.error->message);
      }
      return Error("the driver refused the handshake: " + reply.error->message, "",
                   reply.error->code != proto::error_code::kProtocolVersion);
    }
    auto answer = proto::decodeBody<proto::Hello>(reply.body);
    if (answer.protocol_version != proto::kProtocolVersion) {
      return finalFailure("the driver speaks protocol version " +
                          std::to_string(answer.protocol_version) + ", this agent speaks " +
                          std::to_string(proto::kProtocolVersion));
    }
    if (!secret) return {};

    // The driver proves itself first: this agent says nothing that depends on the secret to
    // a peer that has not shown it holds the secret too.
    if (!answer.auth || answer.auth->proof.empty()) {
      std::string why =
          "the driver did not prove it knows the cluster secret (its Hello carries no auth): "
          "it has no secret configured, or it is not this cluster's driver";
      refuseDriver(ws, why);
      return authFailure(std::move(why));
    }
    const std::string& driver_nonce = answer.auth->nonce;
    if (answer.auth->scheme != proto::auth::kHelloScheme ||
        !proto::auth::validNonce(driver_nonce) || driver_nonce == agent_nonce ||
        !proto::auth::checkHelloProof(*secret, "driver", agent_nonce, driver_nonce,
                                      answer.auth->proof)) {
      std::string why =
          "the driver's proof does not match this agent's cluster secret: the driver holds "
          "another secret, or it is not this cluster's driver";
      refuseDriver(ws, why);
      return authFailure(std::move(why));
    }
    std::uint64_t auth_id = next_id_++;
    proto::Authenticate authenticate{
        proto::auth::helloProof(*secret, "agent", agent_nonce, driver_nonce)};
    text = proto::encodeEnvelope(proto::makeMessage(authenticate, auth_id));
    ws.sendFrame(text.data(), static_cast<int>(text.size()), WebSocket::FRAME_TEXT);
    metrics_.sent(proto::specOf(proto::Authenticate::kType).name);
    auto accepted = receiveHandshakeFrame(ws);
    if (!accepted) return accepted.error();
    if (!accepted->isReply() || accepted->re != auth_id) {
      return finalFailure("the driver did not answer Authenticate with a Reply");
    }
    if (!accepted->ok) {
      return authFailure("the driver refused this agent's proof: " + accepted->error->message);
    }
    handshakeLog()->info("authenticated with driver {} (both sides proved the cluster secret)",
                         options_.url);
    return {};
  } catch (const proto::BodyError& e) {
    return finalFailure(std::string("invalid Hello reply from the driver: ") + e.what());
  } catch (const Poco::Exception& e) {
    return passingFailure("handshake failed: " + e.displayText());
  } catch (const std::runtime_error& e) {
    return finalFailure(std::string("handshake failed: ") + e.what());
  }
}

}  // namespace dockhand::agent
