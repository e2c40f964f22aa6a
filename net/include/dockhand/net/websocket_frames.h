// Reading WebSocket frames (RFC 6455 section 5.2) from a Poco WebSocket, with read-ahead and
// without ever holding more than the frame limit in memory. The agent's driver link and the
// driver's agent server read every frame through it.
//
// Poco's WebSocket::receiveFrame makes one read system call per part of a frame (the first two
// bytes, the extended length, the mask, the payload: four for a masked status update) and
// refuses a frame over its limit by throwing once it has read the length, leaving the payload in
// the stream, so the connection cannot go on. FrameReader reads what the socket has, up to
// 64 KiB at a time, and takes frames out of that buffer: one read for a small frame, none
// for a frame that arrived with the one before. An oversized payload is read in bounded pieces
// and dropped, so the next frame starts where it should.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dockhand/base/result.h"

namespace Poco::Net {  // NOLINT(readability-identifier-naming): Poco's namespace
class WebSocket;
class WebSocketImpl;
}  // namespace Poco::Net

namespace dockhand::net {

struct ReceivedFrame {
  int flags = 0;               // FIN and opcode, as Poco's WebSocket::FrameFlags/FrameOpcodes
  std::uint64_t length = 0;    // the payload's length as the header gave it
  bool discarded = false;      // the payload was over the limit: read and dropped, not kept
  bool end_of_stream = false;  // the peer closed the connection before a frame began
};

// A frame's header (RFC 6455 section 5.2), as it starts a buffer of received bytes.
struct FrameHeader {
  int flags = 0;                 // FIN and opcode, as Poco's WebSocket::FrameFlags/FrameOpcodes
  std::size_t header_bytes = 0;  // 2 to 14: the payload starts this far in
  std::uint64_t length = 0;      // the payload's length
  bool masked = false;
  std::array<unsigned char, 4> mask{};
};

// The header at the start of `bytes`: nullopt while `bytes` holds only part of it; an Error for
// a header no peer may send (a length with its top bit set, a control frame over 125 bytes).
// The one reading of a frame header: FrameReader and the driver's reactor both use it.
Result<std::optional<FrameHeader>> parseFrameHeader(std::string_view bytes);

// Unmasks (or masks) `n` bytes at `data` in place with `mask`.
void applyMask(char* data, std::size_t n, const std::array<unsigned char, 4>& mask);

// One per connection, used by its reading thread only.
class FrameReader {
 public:
  // `max_payload`: the longest payload kept; `read_ahead`: the most read from the socket at once.
  explicit FrameReader(std::size_t max_payload, std::size_t read_ahead = std::size_t{64} * 1024);

  // The next frame of `ws`, from what was read ahead and, when that holds no whole frame, from
  // the socket (through TLS on a secure WebSocket; after the bytes the HTTP handshake read
  // ahead). A payload of at most max_payload bytes lands in `payload` (resized to it,
  // unmasked); a longer one is read in pieces and dropped (`discarded`). Throws
  // Poco::Net::WebSocketException when the connection ends inside a frame, or for a header no
  // peer may send (a length with its top bit set, a control frame over 125 bytes);
  // Poco::TimeoutException and other Poco::Exceptions as the socket's reads do. After a
  // timeout, the bytes of a frame read so far stay buffered and the next call goes on with it.
  ReceivedFrame next(Poco::Net::WebSocket& ws, std::vector<char>& payload);

  // Bytes read from the socket and not handed out yet. A caller that waits for the socket to
  // become readable must not wait while this is not zero: those bytes are not on the socket.
  std::size_t buffered() const { return end_ - begin_; }
  // True when a whole frame (header and payload) is buffered: next() will not read the socket.
  // A reader that has something to write before it may wait uses this.
  bool holdsFrame() const;
  // For a reader woken by poll(2): one read of what the socket has, into the read-ahead buffer
  // (none when the buffer is full). Call only when the socket is readable, or the read waits.
  // False when the peer closed the connection.
  bool receiveReady(Poco::Net::WebSocket& ws);
  // True when next() can go on without waiting for the socket to become readable again: a
  // whole frame is buffered, or a frame has begun that the read-ahead buffer cannot hold whole
  // (next() then reads the rest of it from the socket, waiting as the socket's reads do).
  bool frameReady() const;

 private:
  // Makes at least `n` bytes (n <= the buffer's size) buffered; false when the peer closed the
  // connection first.
  bool fill(Poco::Net::WebSocketImpl& impl, std::size_t n);
  // Moves the buffered bytes to the buffer's start.
  void compact();
  // Copies up to `n` buffered bytes to `out`; returns how many.
  std::size_t take(char* out, std::size_t n);

  std::size_t max_payload_;
  std::vector<char> buffer_;
  std::size_t begin_ = 0;  // the first byte not handed out
  std::size_t end_ = 0;    // one past the last byte read
};

// Appends one unmasked frame (a server's: RFC 6455 section 5.1) to `out`: `flags` (FIN and
// opcode, as Poco's WebSocket::FrameFlags/FrameOpcodes) and `payload`. A server that has several
// frames to send builds them into one buffer and writes it with one system call.
void appendServerFrame(std::string& out, int flags, std::string_view payload);

// Appends one frame masked with `mask` (a client's: every frame a client sends is masked).
void appendClientFrame(std::string& out, int flags, std::string_view payload, std::uint32_t mask);

// Takes what the WebSocket's handshake read ahead, and what the socket has now, into `out`
// without waiting: for a reader that goes on with the socket's descriptor itself. Sets the
// socket non-blocking. False when the peer closed the connection already.
bool takeReadAhead(Poco::Net::WebSocket& ws, std::string& out);

// Writes all of `bytes` to the connected socket `fd` (blocking, under the socket's send
// timeout). Throws Poco::TimeoutException when the timeout passes, Poco::IOException on an
// error.
void sendAll(int fd, std::string_view bytes);

}  // namespace dockhand::net
