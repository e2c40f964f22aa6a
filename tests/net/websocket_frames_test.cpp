// FrameReader (net/websocket_frames.h) over a real WebSocket on 127.0.0.1: a server written
// here with Poco's HTTPServer upgrades the connection, then writes raw bytes on the socket, so
// each test decides how the frames are cut into writes. Every wait has a deadline (the
// sockets' receive timeouts).
#include "dockhand/net/websocket_frames.h"

#include <sys/socket.h>

#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <Poco/Buffer.h>
#include <Poco/Net/HTTPClientSession.h>
#include <Poco/Net/HTTPRequest.h>
#include <Poco/Net/HTTPRequestHandler.h>
#include <Poco/Net/HTTPRequestHandlerFactory.h>
#include <Poco/Net/HTTPResponse.h>
#include <Poco/Net/HTTPServer.h>
#include <Poco/Net/HTTPServerParams.h>
#include <Poco/Net/HTTPServerRequest.h>
#include <Poco/Net/HTTPServerResponse.h>
#include <Poco/Net/NetException.h>
#include <Poco/Net/ServerSocket.h>
#include <Poco/Net/WebSocket.h>
#include <gtest/gtest.h>

namespace dockhand::net {
namespace {

using Poco::Net::WebSocket;
using namespace std::chrono_literals;

// What the server does with its side of the upgraded connection.
using Serve = std::function<void(WebSocket&)>;

class Handler final : public Poco::Net::HTTPRequestHandler {
 public:
  explicit Handler(Serve serve) : serve_(std::move(serve)) {}
  void handleRequest(Poco::Net::HTTPServerRequest& request,
                     Poco::Net::HTTPServerResponse& response) override {
    WebSocket ws(request, response);
    ws.setReceiveTimeout(Poco::Timespan(5, 0));
    serve_(ws);
  }

 private:
  Serve serve_;
};

class Factory final : public Poco::Net::HTTPRequestHandlerFactory {
 public:
  explicit Factory(Serve serve) : serve_(std::move(serve)) {}
  Poco::Net::HTTPRequestHandler* createRequestHandler(
      const Poco::Net::HTTPServerRequest&) override {
    return new Handler(serve_);
  }

 private:
  Serve serve_;
};

// A server that runs `serve` on the one connection it gets, and a client connected to it.
class Connection {
 public:
  explicit Connection(Serve serve)
      : socket_(Poco::Net::SocketAddress("127.0.0.1", 0)),
        server_(new Factory(std::move(serve)), socket_, new Poco::Net::HTTPServerParams) {
    server_.start();
    session_ =
        std::make_unique<Poco::Net::HTTPClientSession>("127.0.0.1", socket_.address().port());
    session_->setTimeout(Poco::Timespan(5, 0));
    Poco::Net::HTTPRequest request(Poco::Net::HTTPRequest::HTTP_GET, "/",
                                   Poco::Net::HTTPMessage::HTTP_1_1);
    Poco::Net::HTTPResponse response;
    client_ = std::make_unique<WebSocket>(*session_, request, response);
    client_->setReceiveTimeout(Poco::Timespan(5, 0));
  }
  ~Connection() {
    client_->shutdown();
    server_.stopAll(true);
  }
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  WebSocket& client() { return *client_; }

 private:
  Poco::Net::ServerSocket socket_;
  Poco::Net::HTTPServer server_;
  std::unique_ptr<Poco::Net::HTTPClientSession> session_;
  std::unique_ptr<WebSocket> client_;
};

// A frame as a server sends it (unmasked) or a client (masked with `mask`).
std::string frame(const std::string& payload, unsigned char first = 0x81, bool masked = false) {
  std::string out(1, static_cast<char>(first));
  const unsigned char mask_bit = masked ? 0x80 : 0;
  if (payload.size() < 126) {
    out += static_cast<char>(mask_bit | payload.size());
  } else if (payload.size() < 65536) {
    out += static_cast<char>(mask_bit | 126);
    out += static_cast<char>(payload.size() >> 8);
    out += static_cast<char>(payload.size() & 0xff);
  } else {
    out += static_cast<char>(mask_bit | 127);
    for (int shift = 56; shift >= 0; shift -= 8) {
      out += static_cast<char>((static_cast<std::uint64_t>(payload.size()) >> shift) & 0xff);
    }
  }
  const std::string mask = "\x12\x34\x56\x78";
  if (masked) out += mask;
  for (std::size_t i = 0; i < payload.size(); ++i) {
    out += masked ? static_cast<char>(payload[i] ^ mask[i % 4]) : payload[i];
  }
  return out;
}

void writeRaw(WebSocket& ws, const std::string& bytes) {
  ASSERT_EQ(::send(ws.impl()->sockfd(), bytes.data(), bytes.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(bytes.size()));
}

std::string text(const std::vector<char>& payload) { return {payload.begin(), payload.end()}; }

// Waits until the client has read everything, so that the server's end closes after it.
void holdUntil(std::future<void>& done) { done.wait_for(10s); }

TEST(FrameReaderTest, FramesThatArriveTogetherComeOutOneByOne) {
  std::promise<void> read;
  auto done = read.get_future();
  const std::string big(70000, 'b');
  Connection connection([&](WebSocket& ws) {
    writeRaw(ws, frame("one") + frame(std::string(300, 'x')) + frame("three") + frame(big) +
                     frame("last"));
    holdUntil(done);
  });
  FrameReader reader(1 << 20, 4096);
  EXPECT_FALSE(reader.holdsFrame());
  std::vector<char> payload;
  auto first = reader.next(connection.client(), payload);
  EXPECT_EQ(first.flags, 0x81);
  EXPECT_EQ(text(payload), "one");
  EXPECT_GT(reader.buffered(), 0u);  // the next frames were read with it
  EXPECT_TRUE(reader.holdsFrame());
  reader.next(connection.client(), payload);
  EXPECT_EQ(text(payload), std::string(300, 'x'));
  EXPECT_TRUE(reader.holdsFrame());
  reader.next(connection.client(), payload);
  EXPECT_EQ(text(payload), "three");
  // Only the start of the large frame is buffered: the next call reads the socket.
  EXPECT_GT(reader.buffered(), 0u);
  EXPECT_FALSE(reader.holdsFrame());
  // Longer than the read-ahead: what was buffered, then the rest straight into place.
  auto large = reader.next(connection.client(), payload);
  EXPECT_EQ(large.length, big.size());
  EXPECT_EQ(text(payload), big);
  reader.next(connection.client(), payload);
  EXPECT_EQ(text(payload), "last");
  read.set_value();
}

TEST(FrameReaderTest, AFrameWrittenInPiecesIsPutTogether) {
  std::promise<void> read;
  auto done = read.get_future();
  const std::string bytes = frame(std::string(200, 'p'), 0x82);
  Connection connection([&](WebSocket& ws) {
    for (char c : bytes) {
      writeRaw(ws, std::string(1, c));
      std::this_thread::sleep_for(200us);
    }
    holdUntil(done);
  });
  FrameReader reader(1 << 20);
  std::vector<char> payload;
  auto got = reader.next(connection.client(), payload);
  EXPECT_EQ(got.flags, 0x82);
  EXPECT_EQ(text(payload), std::string(200, 'p'));
  EXPECT_EQ(reader.buffered(), 0u);
  EXPECT_FALSE(reader.holdsFrame());
  read.set_value();
}

TEST(FrameReaderTest, AnOversizedFrameIsDroppedAndTheNextOneReadAsUsual) {
  std::promise<void> read;
  auto done = read.get_future();
  Connection connection([&](WebSocket& ws) {
    writeRaw(ws, frame(std::string(100000, 'o')) + frame("after"));
    holdUntil(done);
  });
  FrameReader reader(1000, 4096);
  std::vector<char> payload{'s', 't', 'a', 'l', 'e'};
  auto dropped = reader.next(connection.client(), payload);
  EXPECT_TRUE(dropped.discarded);
  EXPECT_EQ(dropped.length, 100000u);
  EXPECT_TRUE(payload.empty());
  auto next = reader.next(connection.client(), payload);
  EXPECT_FALSE(next.discarded);
  EXPECT_EQ(text(payload), "after");
  read.set_value();
}

TEST(FrameReaderTest, MaskedFramesAreUnmasked) {
  // A client's frames are masked: the server reads them. Both frames in one write.
  std::promise<std::vector<std::string>> got;
  auto result = got.get_future();
  Connection connection([&](WebSocket& ws) {
    FrameReader reader(1 << 20);
    std::vector<char> payload;
    std::vector<std::string> texts;
    for (int i = 0; i < 2; ++i) {
      reader.next(ws, payload);
      texts.push_back(text(payload));
    }
    got.set_value(texts);
  });
  writeRaw(connection.client(),
           frame("hello, driver", 0x81, true) + frame(std::string(1000, 'm'), 0x81, true));
  ASSERT_EQ(result.wait_for(10s), std::future_status::ready);
  EXPECT_EQ(result.get(), (std::vector<std::string>{"hello, driver", std::string(1000, 'm')}));
}

TEST(FrameReaderTest, TheEndOfTheStreamBetweenFramesAndInsideOne) {
  Connection between([&](WebSocket& ws) { writeRaw(ws, frame("only")); });
  FrameReader reader(1 << 20);
  std::vector<char> payload;
  reader.next(between.client(), payload);
  EXPECT_EQ(text(payload), "only");
  EXPECT_TRUE(reader.next(between.client(), payload).end_of_stream);

  Connection inside([&](WebSocket& ws) { writeRaw(ws, frame("cut short").substr(0, 6)); });
  FrameReader cut(1 << 20);
  EXPECT_THROW(cut.next(inside.client(), payload), Poco::Net::WebSocketException);
}

// What a server builds with appendServerFrame and writes with sendAll in one go is what Poco's
// own reader reads, frame by frame, at each length encoding, control frames included.
TEST(ServerFramesTest, PocosReaderReadsFramesBuiltHere) {
  std::promise<void> read;
  auto done = read.get_future();
  const std::vector<std::string> payloads = {"", "short", std::string(126, 'm'),
                                             std::string(65535, 'n'), std::string(65536, 'l')};
  Connection connection([&](WebSocket& ws) {
    std::string wire;
    for (const auto& p : payloads) appendServerFrame(wire, WebSocket::FRAME_TEXT, p);
    appendServerFrame(wire, int{WebSocket::FRAME_FLAG_FIN} | int{WebSocket::FRAME_OP_PING}, "ping");
    sendAll(ws.impl()->sockfd(), wire);
    holdUntil(done);
  });
  connection.client().setMaxPayloadSize(1 << 20);
  Poco::Buffer<char> buffer(0);
  for (const auto& p : payloads) {
    int flags = 0;
    buffer.resize(0);
    const int n = connection.client().receiveFrame(buffer, flags);
    EXPECT_EQ(flags, WebSocket::FRAME_TEXT);
    ASSERT_EQ(n, static_cast<int>(p.size()));
    EXPECT_EQ(std::string(buffer.begin(), buffer.size()), p);
  }
  int flags = 0;
  buffer.resize(0);
  EXPECT_EQ(connection.client().receiveFrame(buffer, flags), 4);
  EXPECT_EQ(flags, int{WebSocket::FRAME_FLAG_FIN} | int{WebSocket::FRAME_OP_PING});
  read.set_value();
}

// What a client builds with appendClientFrame (masked, each with its own key) is what Poco's
// server side reads.
TEST(ClientFramesTest, PocosServerReadsMaskedFramesBuiltHere) {
  const std::vector<std::string> payloads = {"", "status", std::string(300, 's'),
                                             std::string(70000, 'k')};
  std::promise<std::vector<std::string>> got;
  auto result = got.get_future();
  Connection connection([&](WebSocket& ws) {
    ws.setMaxPayloadSize(1 << 20);
    std::vector<std::string> texts;
    Poco::Buffer<char> buffer(0);
    for (std::size_t i = 0; i < payloads.size(); ++i) {
      int flags = 0;
      buffer.resize(0);
      ws.receiveFrame(buffer, flags);
      texts.emplace_back(buffer.begin(), buffer.size());
    }
    got.set_value(texts);
  });
  std::string wire;
  std::uint32_t mask = 0x9e3779b9U;
  for (const auto& p : payloads) {
    appendClientFrame(wire, WebSocket::FRAME_TEXT, p, mask);
    mask = mask * 2654435761U + 1;
  }
  EXPECT_EQ(wire.find("status"), std::string::npos) << "the payload went out unmasked";
  sendAll(connection.client().impl()->sockfd(), wire);
  ASSERT_EQ(result.wait_for(10s), std::future_status::ready);
  EXPECT_EQ(result.get(), payloads);
}

TEST(FrameReaderTest, HeadersNoPeerMaySendAreRefused) {
  // A control frame (ping) over 125 bytes.
  Connection connection([&](WebSocket& ws) { writeRaw(ws, frame(std::string(200, 'c'), 0x89)); });
  FrameReader reader(1 << 20);
  std::vector<char> payload;
  try {
    reader.next(connection.client(), payload);
    FAIL() << "no exception";
  } catch (const Poco::Net::WebSocketException& e) {
    EXPECT_EQ(e.code(), WebSocket::WS_ERR_PAYLOAD_TOO_BIG);
  }
}

}  // namespace
}  // namespace dockhand::net
