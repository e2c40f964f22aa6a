#include "dockhand/net/websocket_frames.h"

#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <string>

#include <Poco/Exception.h>
#include <Poco/Net/NetException.h>
#include <Poco/Net/WebSocket.h>
#include <Poco/Net/WebSocketImpl.h>

namespace dockhand::net {
namespace {

using Poco::Net::WebSocket;
using Poco::Net::WebSocketException;
using Poco::Net::WebSocketImpl;

// WebSocketImpl::receiveSomeBytes reads what there is, up to n bytes, of the stream under the
// frames: first what the HTTP handshake read ahead, then the socket (through TLS on a wss://
// connection). It is protected; this class only names it, it is never instantiated.
class RawReads final : public WebSocketImpl {
 public:
  RawReads() = delete;
  // 0 when the peer closed the connection.
  static int receiveSome(WebSocketImpl& impl, char* buffer, std::size_t n) {
    return (impl.*(&RawReads::receiveSomeBytes))(buffer, static_cast<int>(n));
  }
};

constexpr std::size_t kDiscardPiece = std::size_t{64} * 1024;

// How many bytes of extended payload length follow a frame header's second byte (RFC 6455 5.2).
std::size_t lengthBytes(unsigned char second) {
  const unsigned length = second & 0x7fU;
  return length == 126 ? 2 : length == 127 ? 8 : 0;
}

// A frame header's size from its second byte: the extended length and the mask it announces.
std::size_t headerBytes(unsigned char second) {
  return 2 + lengthBytes(second) + ((second & 0x80U) != 0 ? 4 : 0);
}

// The payload length of the whole header at `header`.
std::uint64_t payloadLength(const unsigned char* header) {
  const std::size_t length_bytes = lengthBytes(header[1]);
  if (length_bytes == 0) return header[1] & 0x7fU;
  std::uint64_t length = 0;
  for (std::size_t i = 0; i < length_bytes; ++i) length = (length << 8U) | header[2 + i];
  return length;
}

[[noreturn]] void incomplete() {
  throw WebSocketException("the connection ended inside a frame",
                           WebSocket::WS_ERR_INCOMPLETE_FRAME);
}

// Reads exactly `n` bytes straight from the socket into `out`.
void readExactly(WebSocketImpl& impl, char* out, std::size_t n) {
  while (n > 0) {
    const int got = RawReads::receiveSome(impl, out, n);
    if (got <= 0) incomplete();
    out += got;
    n -= static_cast<std::size_t>(got);
  }
}

}  // namespace

FrameReader::FrameReader(std::size_t max_payload, std::size_t read_ahead)
    : max_payload_(max_payload), buffer_(std::max<std::size_t>(read_ahead, 16)) {}

void FrameReader::compact() {
  if (begin_ == 0) return;
  std::memmove(buffer_.data(), buffer_.data() + begin_, end_ - begin_);
  end_ -= begin_;
  begin_ = 0;
}

bool FrameReader::fill(WebSocketImpl& impl, std::size_t n) {
  if (end_ - begin_ >= n) return true;
  if (buffer_.size() - begin_ < n) compact();
  while (end_ - begin_ < n) {
    const int got = RawReads::receiveSome(impl, buffer_.data() + end_, buffer_.size() - end_);
    if (got <= 0) return false;
    end_ += static_cast<std::size_t>(got);
  }
  return true;
}

std::size_t FrameReader::take(char* out, std::size_t n) {
  const std::size_t taken = std::min(n, end_ - begin_);
  if (out != nullptr && taken > 0) std::memcpy(out, buffer_.data() + begin_, taken);
  begin_ += taken;
  if (begin_ == end_) begin_ = end_ = 0;
  return taken;
}

bool FrameReader::holdsFrame() const {
  if (buffered() < 2) return false;
  const auto* header = reinterpret_cast<const unsigned char*>(buffer_.data() + begin_);
  const std::size_t header_bytes = headerBytes(header[1]);
  return buffered() >= header_bytes && payloadLength(header) <= buffered() - header_bytes;
}

bool FrameReader::frameReady() const {
  if (holdsFrame()) return true;
  if (buffered() < 2) return false;
  const auto* header = reinterpret_cast<const unsigned char*>(buffer_.data() + begin_);
  const std::size_t header_bytes = headerBytes(header[1]);
  if (buffered() < header_bytes) return false;
  return payloadLength(header) > buffer_.size() - header_bytes;
}

bool FrameReader::receiveReady(WebSocket& ws) {
  auto* impl = dynamic_cast<WebSocketImpl*>(ws.impl());
  if (impl == nullptr) throw WebSocketException("not a WebSocket", WebSocket::WS_ERR_NO_HANDSHAKE);
  if (end_ == buffer_.size()) compact();
  if (end_ == buffer_.size()) return true;  // full: next() takes from it first
  const int got = RawReads::receiveSome(*impl, buffer_.data() + end_, buffer_.size() - end_);
  if (got <= 0) return false;
  end_ += static_cast<std::size_t>(got);
  return true;
}

Result<std::optional<FrameHeader>> parseFrameHeader(std::string_view bytes) {
  if (bytes.size() < 2) return std::optional<FrameHeader>();
  const auto* header = reinterpret_cast<const unsigned char*>(bytes.data());
  FrameHeader frame;
  frame.flags = header[0];
  frame.masked = (header[1] & 0x80U) != 0;
  frame.header_bytes = headerBytes(header[1]);
  if (bytes.size() < frame.header_bytes) return std::optional<FrameHeader>();
  frame.length = payloadLength(header);
  if ((frame.length >> 63U) != 0) {
    return Error("a frame length with its most significant bit set (RFC 6455 5.2)");
  }
  const bool control = (static_cast<unsigned>(frame.flags) & 0x08U) != 0;
  if (control && frame.length > 125) return Error("a control frame over 125 bytes (RFC 6455 5.5)");
  if (frame.masked) {
    std::memcpy(frame.mask.data(), header + frame.header_bytes - frame.mask.size(),
                frame.mask.size());
  }
  return std::optional<FrameHeader>(frame);
}

void applyMask(char* data, std::size_t n, const std::array<unsigned char, 4>& mask) {
  for (std::size_t i = 0; i < n; ++i) {
    data[i] = static_cast<char>(static_cast<unsigned char>(data[i]) ^ mask[i % 4]);
  }
}

ReceivedFrame FrameReader::next(WebSocket& ws, std::vector<char>& payload) {
  auto* impl = dynamic_cast<WebSocketImpl*>(ws.impl());
  if (impl == nullptr) throw WebSocketException("not a WebSocket", WebSocket::WS_ERR_NO_HANDSHAKE);
  ReceivedFrame frame;
  if (!fill(*impl, 2)) {
    if (buffered() != 0) incomplete();
    frame.end_of_stream = true;
    return frame;
  }
  const std::size_t header_bytes = headerBytes(static_cast<unsigned char>(buffer_[begin_ + 1]));
  if (!fill(*impl, header_bytes)) incomplete();
  auto parsed = parseFrameHeader(std::string_view(buffer_.data() + begin_, header_bytes));
  if (!parsed) throw WebSocketException(parsed.error().message, WebSocket::WS_ERR_PAYLOAD_TOO_BIG);
  const FrameHeader& header = **parsed;
  frame.flags = header.flags;
  const std::uint64_t length = header.length;
  take(nullptr, header_bytes);
  frame.length = length;

  if (length > max_payload_) {
    // Read and dropped in pieces: the frame never occupies more than one piece of memory.
    std::uint64_t left =
        length -
        take(nullptr, static_cast<std::size_t>(std::min<std::uint64_t>(length, buffered())));
    std::vector<char> piece(static_cast<std::size_t>(std::min<std::uint64_t>(left, kDiscardPiece)));
    while (left > 0) {
      const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(left, piece.size()));
      readExactly(*impl, piece.data(), n);
      left -= n;
    }
    payload.clear();
    frame.discarded = true;
    return frame;
  }
  const auto size = static_cast<std::size_t>(length);
  payload.resize(size);
  const std::size_t copied = take(payload.data(), size);
  // The rest of a payload longer than what was read ahead comes straight into place.
  if (copied < size) readExactly(*impl, payload.data() + copied, size - copied);
  if (header.masked) applyMask(payload.data(), size, header.mask);
  return frame;
}

bool takeReadAhead(WebSocket& ws, std::string& out) {
  auto* impl = dynamic_cast<WebSocketImpl*>(ws.impl());
  if (impl == nullptr) throw WebSocketException("not a WebSocket", WebSocket::WS_ERR_NO_HANDSHAKE);
  ws.setBlocking(false);
  std::array<char, std::size_t{16} * 1024> chunk{};
  for (;;) {
    int got = 0;
    try {
      got = RawReads::receiveSome(*impl, chunk.data(), chunk.size());
    } catch (const Poco::Exception&) {
      return true;  // nothing more now (or an error the reader meets on its next read)
    }
    if (got == 0) return false;
    if (got < 0) return true;
    out.append(chunk.data(), static_cast<std::size_t>(got));
  }
}

namespace {

// The first bytes of a frame: flags, the length (7 bits, or 126/127 and 2/8 bytes) and the
// mask bit.
void appendHeader(std::string& out, int flags, std::uint64_t length, bool masked) {
  const auto mask_bit = static_cast<unsigned char>(masked ? 0x80U : 0U);
  out += static_cast<char>(flags & 0xff);
  if (length < 126) {
    out += static_cast<char>(mask_bit | length);
  } else if (length <= 0xffff) {
    out += static_cast<char>(mask_bit | 126U);
    out += static_cast<char>((length >> 8U) & 0xffU);
    out += static_cast<char>(length & 0xffU);
  } else {
    out += static_cast<char>(mask_bit | 127U);
    for (int shift = 56; shift >= 0; shift -= 8) {
      out += static_cast<char>((length >> static_cast<unsigned>(shift)) & 0xffU);
    }
  }
}

}  // namespace

void appendServerFrame(std::string& out, int flags, std::string_view payload) {
  appendHeader(out, flags, payload.size(), /*masked=*/false);
  out.append(payload);
}

void appendClientFrame(std::string& out, int flags, std::string_view payload, std::uint32_t mask) {
  appendHeader(out, flags, payload.size(), /*masked=*/true);
  const std::array<unsigned char, 4> key = {
      static_cast<unsigned char>(mask >> 24U), static_cast<unsigned char>(mask >> 16U),
      static_cast<unsigned char>(mask >> 8U), static_cast<unsigned char>(mask)};
  out.append(reinterpret_cast<const char*>(key.data()), key.size());
  const std::size_t start = out.size();
  out.append(payload);
  for (std::size_t i = 0; i < payload.size(); ++i) {
    out[start + i] = static_cast<char>(static_cast<unsigned char>(out[start + i]) ^ key[i % 4]);
  }
}

void sendAll(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t sent = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (sent >= 0) {
      bytes.remove_prefix(static_cast<std::size_t>(sent));
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      throw Poco::TimeoutException("sending timed out");
    } else if (errno != EINTR) {
      throw Poco::IOException(std::string("send: ") + std::strerror(errno));
    }
  }
}

}  // namespace dockhand::net
