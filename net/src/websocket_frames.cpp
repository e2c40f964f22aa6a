#include "rpc/websocket_frames.h"

#include <algorithm>
#include <array>
#include <string>

#include <Poco/Net/NetException.h>
#include <Poco/Net/WebSocket.h>
#include <Poco/Net/WebSocketImpl.h>

namespace dockhand::agent {
namespace {

using Poco::Net::WebSocket;
using Poco::Net::WebSocketException;
using Poco::Net::WebSocketImpl;

// WebSocketImpl::receiveNBytes reads exactly n bytes of the stream under the frames: first
// what the HTTP handshake read ahead, then the socket (through TLS on a wss:// connection).
// It is protected; this class only names it, it is never instantiated.
class RawReads final : public WebSocketImpl {
 public:
  RawReads() = delete;
  // 0 when the peer closed the connection before the first byte.
  static int receiveExactly(WebSocketImpl& impl, char* buffer, int n) {
    return (impl.*(&RawReads::receiveNBytes))(buffer, n);
  }
};

constexpr std::size_t kDiscardPiece = std::size_t{64} * 1024;

void readOrThrow(WebSocketImpl& impl, char* buffer, std::size_t n) {
  if (RawReads::receiveExactly(impl, buffer, static_cast<int>(n)) <= 0) {
    throw WebSocketException("the connection ended inside a frame",
                             WebSocket::WS_ERR_INCOMPLETE_FRAME);
  }
}

}  // namespace

ReceivedFrame receiveFrame(WebSocket& ws, std::vector<char>& payload, std::size_t max_payload) {
  auto* impl = dynamic_cast<WebSocketImpl*>(ws.impl());
  if (impl == nullptr) throw WebSocketException("not a WebSocket", WebSocket::WS_ERR_NO_HANDSHAKE);
  ReceivedFrame frame;
  std::array<unsigned char, 8> header{};
  if (RawReads::receiveExactly(*impl, reinterpret_cast<char*>(header.data()), 2) <= 0) {
    frame.end_of_stream = true;
    return frame;
  }
  frame.flags = header[0];
  const bool masked = (header[1] & 0x80U) != 0;
  std::uint64_t length = header[1] & 0x7fU;
  if (length == 126 || length == 127) {
    const std::size_t bytes = length == 126 ? 2 : 8;
    readOrThrow(*impl, reinterpret_cast<char*>(header.data()), bytes);
    length = 0;
    for (std::size_t i = 0; i < bytes; ++i) length = (length << 8U) | header[i];
    if ((length >> 63U) != 0) {
      throw WebSocketException("a frame length with its most significant bit set (RFC 6455 5.2)",
                               WebSocket::WS_ERR_PAYLOAD_TOO_BIG);
    }
  }
  const bool control = (static_cast<unsigned>(frame.flags) & 0x08U) != 0;
  if (control && length > 125) {
    throw WebSocketException("a control frame over 125 bytes (RFC 6455 5.5)",
                             WebSocket::WS_ERR_PAYLOAD_TOO_BIG);
  }
  std::array<unsigned char, 4> mask{};
  if (masked) readOrThrow(*impl, reinterpret_cast<char*>(mask.data()), mask.size());
  frame.length = length;

  if (length > max_payload) {
    // Read and dropped in pieces: the frame never occupies more than one piece of memory.
    std::vector<char> piece(
        static_cast<std::size_t>(std::min<std::uint64_t>(length, kDiscardPiece)));
    for (std::uint64_t left = length; left > 0;) {
      const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(left, piece.size()));
      readOrThrow(*impl, piece.data(), n);
      left -= n;
    }
    payload.clear();
    frame.discarded = true;
    return frame;
  }
  payload.resize(static_cast<std::size_t>(length));
  if (length > 0) readOrThrow(*impl, payload.data(), payload.size());
  if (masked) {
    for (std::size_t i = 0; i < payload.size(); ++i) {
      payload[i] = static_cast<char>(static_cast<unsigned char>(payload[i]) ^ mask[i % 4]);
    }
  }
  return frame;
}

}  // namespace dockhand::agent
