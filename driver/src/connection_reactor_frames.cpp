// ConnectionReactor's frames: taken out of what a connection's socket gave (one header reading,
// net::parseFrameHeader), handled (ping, close, fragments put together, a message delivered to
// the FrameHandler) or refused (too large: an Error, then the connection closes once the peer
// has read it). See connection_reactor.h.
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "dockhand/base/logging.h"
#include "dockhand/net/websocket_frames.h"
#include "dockhand/protocol/messages.h"

#include "connection_reactor.h"
#include "connection_reactor_slot.h"

namespace dockhand::driver {

using Poco::Net::WebSocket;

namespace {

constexpr int kFinPong = int{WebSocket::FRAME_FLAG_FIN} | int{WebSocket::FRAME_OP_PONG};

}  // namespace

void ConnectionReactor::takeFrames(Slot& s) {
  int handled = 0;
  while (!s.ended && !s.discard_input) {
    if (handled == reactor::kFramesPerTurn) {
      later(s);  // the rest next turn
      break;
    }
    const std::string_view buffered(s.in.data() + s.in_begin, s.in_end - s.in_begin);
    auto parsed = net::parseFrameHeader(buffered);
    if (!parsed) {
      handler_.onDropped(s.connection, DropReason::kBadWebSocket);
      end(s, "WebSocket error: " + parsed.error().message);
      return;
    }
    if (!*parsed) break;
    const net::FrameHeader& header = **parsed;
    if (header.length > options_.max_frame_bytes) {
      refuse(s, std::string(protocol::error_code::kFrameTooLarge),
             fmt::format("a frame larger than the limit of {} bytes", options_.max_frame_bytes));
      return;
    }
    const auto length = static_cast<std::size_t>(header.length);
    if (buffered.size() < header.header_bytes + length) break;
    char* payload = s.in.data() + s.in_begin + header.header_bytes;
    if (header.masked) net::applyMask(payload, length, header.mask);
    s.in_begin += header.header_bytes + length;
    ++handled;
    handleFrame(s, header.flags, std::string_view(payload, length));
  }
  if (s.ended) return;
  // Keep the unread part at the front, so that the buffer does not creep.
  if (s.in_begin == s.in_end) {
    s.in_begin = s.in_end = 0;
    if (s.in.size() > reactor::kMaxUnsent) std::vector<char>().swap(s.in);  // after a large frame
  }
}

void ConnectionReactor::handleFrame(Slot& s, int flags, std::string_view payload) {
  Connection& c = *s.connection;
  const int opcode = flags & WebSocket::FRAME_OP_BITMASK;
  switch (opcode) {
    case WebSocket::FRAME_OP_CLOSE:
      if (s.phase == Slot::Phase::kOpen) s.why = "the agent closed the WebSocket";
      end(s, s.why);
      return;
    case WebSocket::FRAME_OP_PING:
      c.send(Connection::Control{kFinPong, std::string(payload)});
      return;
    case WebSocket::FRAME_OP_PONG:
      return;
    case WebSocket::FRAME_OP_TEXT:
    case WebSocket::FRAME_OP_BINARY:
      if ((flags & WebSocket::FRAME_FLAG_FIN) != 0) {
        s.in_message = false;
        deliver(s, payload);  // a whole message in one frame: no copy
        return;
      }
      s.message.assign(payload);
      s.in_message = true;
      break;
    case WebSocket::FRAME_OP_CONT:
      if (!s.in_message) {
        c.send(protocol::makeError(protocol::error_code::kMalformedFrame,
                                   "continuation frame without a message to continue"));
        return;
      }
      if (s.message.size() + payload.size() > options_.max_frame_bytes) {
        refuse(s, std::string(protocol::error_code::kFrameTooLarge),
               fmt::format("a fragmented message larger than the limit of {} bytes",
                           options_.max_frame_bytes));
        return;
      }
      s.message.append(payload);
      break;
    default:
      c.send(protocol::makeError(protocol::error_code::kMalformedFrame,
                                 fmt::format("unsupported WebSocket opcode {}", opcode)));
      return;
  }
  if ((flags & WebSocket::FRAME_FLAG_FIN) == 0) return;
  s.in_message = false;
  deliver(s, s.message);
}

void ConnectionReactor::deliver(Slot& s, std::string_view message) {
  Connection& c = *s.connection;
  const bool was_closing = c.closing();
  try {
    handler_.onFrame(s.connection, message);
  } catch (const std::exception& e) {
    // The handler must not throw; if it does, this connection ends, the server goes on.
    const std::string why = fmt::format("internal error: {}", e.what());
    logger("driver")->error("connection {} ({}): {}", c.id(), c.peer(), why);
    end(s, why);
    return;
  }
  // The handler closed it (e.g. a bad Hello): the peer reads why, then it goes.
  if (!was_closing && c.closing()) closeAfterRead(s, "closed by the driver");
}

// The connection ends for a reason of ours once the peer has read our last frames: what it
// sends meanwhile is read and dropped.
void ConnectionReactor::closeAfterRead(Slot& s, std::string why) {
  s.why = std::move(why);
  s.discard_input = true;
  s.in_begin = s.in_end = 0;
  wake(s.connection->id());
}

void ConnectionReactor::refuse(Slot& s, const std::string& error_code, std::string why) {
  Connection& c = *s.connection;
  handler_.onDropped(s.connection, DropReason::kFrameTooLarge);
  logger("driver")->warn("connection {} ({}): {}; closing it", c.id(), c.peer(), why);
  c.send(protocol::makeError(error_code, why));
  c.close(why);
  closeAfterRead(s, std::move(why));
}

}  // namespace dockhand::driver
