// Reading one WebSocket frame from the driver without ever holding more than the frame limit
// in memory.
//
// Poco's WebSocket::receiveFrame refuses a frame over its limit by throwing once it has read
// the frame's length, leaving the payload unread in the stream: the connection cannot go on.
// receiveFrame() below reads the header itself (RFC 6455 section 5.2), so it knows the
// payload's length and can read an oversized payload in bounded pieces and drop it; the next
// frame then starts where it should, and the link survives the bad frame.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace Poco::Net {  // NOLINT(readability-identifier-naming): Poco's namespace
class WebSocket;
}  // namespace Poco::Net

namespace dockhand::agent {

struct ReceivedFrame {
  int flags = 0;               // FIN and opcode, as Poco's WebSocket::FrameFlags/FrameOpcodes
  std::uint64_t length = 0;    // the payload's length as the header gave it
  bool discarded = false;      // the payload was over the limit: read and dropped, not kept
  bool end_of_stream = false;  // the peer closed the connection before a frame began
};

// Reads the next frame of `ws`. A payload of at most `max_payload` bytes lands in `payload`
// (resized to it, unmasked); a longer one is read in pieces of at most 64 KiB and dropped
// (`discarded`). Throws Poco::Net::WebSocketException when the connection ends inside a frame,
// or for a header no peer may send (a length with its top bit set, a control frame over 125
// bytes); Poco::TimeoutException and other Poco::Exceptions as the socket's reads do.
ReceivedFrame receiveFrame(Poco::Net::WebSocket& ws, std::vector<char>& payload,
                           std::size_t max_payload);

}  // namespace dockhand::agent
