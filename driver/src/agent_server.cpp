#include "dockhand/driver/agent_server.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <istream>
#include <thread>
#include <vector>

#include <Poco/Net/HTTPRequestHandler.h>
#include <Poco/Net/HTTPRequestHandlerFactory.h>
#include <Poco/Net/HTTPServer.h>
#include <Poco/Net/HTTPServerParams.h>
#include <Poco/Net/HTTPServerRequest.h>
#include <Poco/Net/HTTPServerResponse.h>
#include <Poco/Net/NetException.h>
#include <Poco/Net/ServerSocket.h>
#include <Poco/Net/SocketAddress.h>
#include <Poco/Net/WebSocket.h>
#include <Poco/ThreadPool.h>
#include <Poco/URI.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "dockhand/base/logging.h"
#include "dockhand/base/thread_name.h"
#include "dockhand/net/websocket_frames.h"
#include "dockhand/tls/http_server.h"
#include "dockhand/tls/tls.h"

#include "connection_reactor.h"

namespace dockhand::driver {

using Poco::Net::WebSocket;

namespace {

// Reads and discards what the peer still sends, until it closes or `budget` passes, so that
// closing our end does not reset the connection before the peer has read our last frames.
void drainUntilClosed(WebSocket& socket, std::chrono::milliseconds budget) {
  const int fd = socket.impl()->sockfd();
  const auto deadline = std::chrono::steady_clock::now() + budget;
  char sink[64 * 1024];
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return;
    pollfd p{fd, POLLIN, 0};
    int ready = ::poll(&p, 1, static_cast<int>(left.count()));
    if (ready <= 0) return;
    ssize_t n = ::recv(fd, sink, sizeof sink, 0);
    if (n <= 0) return;
  }
}

}  // namespace

std::string_view toString(DropReason reason) {
  switch (reason) {
    case DropReason::kFrameTooLarge:
      return "frame_too_large";
    case DropReason::kStoppedReading:
      return "stopped_reading";
    case DropReason::kNoHello:
      return "no_hello";
    case DropReason::kBadWebSocket:
      return "bad_websocket";
  }
  return "unknown";
}

// ---- the HTTP side ----------------------------------------------------------------------

class WebSocketHandler : public Poco::Net::HTTPRequestHandler {
 public:
  explicit WebSocketHandler(AgentServer& server) : server_(server) {}

  void handleRequest(Poco::Net::HTTPServerRequest& request,
                     Poco::Net::HTTPServerResponse& response) override {
    const std::string peer = request.clientAddress().toString();
    if (Poco::icompare(request.get("Upgrade", ""), "websocket") != 0) {
      servePlain(request, response);
      return;
    }
    std::unique_ptr<WebSocket> socket;
    try {
      socket = std::make_unique<WebSocket>(request, response);
    } catch (const Poco::Exception& e) {
      logger("driver")->warn("refused a WebSocket handshake from {}: {}", peer, e.displayText());
      if (!response.sent()) {
        response.setStatus(Poco::Net::HTTPResponse::HTTP_BAD_REQUEST);
        response.setContentLength(0);
        response.send();
      }
      return;
    }
    if (!socket->secure()) {
      adopt(*socket, peer);
      return;
    }
    serve(*socket, peer);
  }

 private:
  // Control requests are small: a larger body is refused rather than read.
  static constexpr std::streamsize kMaxControlBody = std::streamsize{64} * 1024;

  void servePlain(Poco::Net::HTTPServerRequest& request, Poco::Net::HTTPServerResponse& response) {
    const std::string path = Poco::URI(request.getURI()).getPath();
    if (path == "/healthz") {
      response.setStatus(Poco::Net::HTTPResponse::HTTP_OK);
      response.setContentType("text/plain");
      response.send() << "ok\n";
      return;
    }
    std::string body;
    if (request.hasContentLength() && request.getContentLength64() > kMaxControlBody) {
      response.setStatus(Poco::Net::HTTPResponse::HTTP_REQUESTENTITYTOOLARGE);
      response.setContentType("text/plain");
      response.send() << "request body too large\n";
      return;
    }
    if (request.getMethod() == Poco::Net::HTTPRequest::HTTP_POST) {
      std::vector<char> chunk(4096);
      std::istream& in = request.stream();
      while (in && static_cast<std::streamsize>(body.size()) <= kMaxControlBody) {
        in.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
        body.append(chunk.data(), static_cast<std::size_t>(in.gcount()));
      }
    }
    std::optional<HttpReply> reply = server_.handler_.onHttpRequest(
        ControlRequest{request.getMethod(), path, body, request.get("Authorization", "")});
    if (!reply) {
      response.setStatus(Poco::Net::HTTPResponse::HTTP_UPGRADE_REQUIRED);
      response.setContentType("text/plain");
      response.send() << "dockhand-driver: agents connect with a WebSocket\n";
      return;
    }
    response.setStatus(static_cast<Poco::Net::HTTPResponse::HTTPStatus>(reply->status));
    for (const auto& [name, value] : reply->headers) response.set(name, value);
    response.setContentType(reply->content_type);
    response.setContentLength64(static_cast<Poco::Int64>(reply->body.size()));
    response.send() << reply->body;
  }

  // A plain connection: the reactor serves it from here, and this pool thread goes back.
  void adopt(WebSocket& socket, const std::string& peer) {
    socket.setNoDelay(true);
    auto connection = std::make_shared<Connection>(server_.next_connection_id_++, peer,
                                                   server_.options().max_queued_frames);
    connection->attach(server_.reactor_.get());
    server_.track(connection);
    server_.reactor_->adopt(std::move(connection), socket);
  }

  // A TLS connection: this pool thread reads it, a writer thread of its own writes it.
  void serve(WebSocket& socket, const std::string& peer) {
    const ServerOptions& options = server_.options();
    socket.setMaxPayloadSize(static_cast<int>(options.max_frame_bytes));
    socket.setNoDelay(true);
    socket.setSendTimeout(Poco::Timespan(30, 0));
    socket.setReceiveTimeout(Poco::Timespan(options.hello_timeout_ms * 1000));

    auto connection = std::make_shared<Connection>(server_.next_connection_id_++, peer,
                                                   options.max_queued_frames);
    connection->attach(&socket);
    server_.track(connection);
    FrameHandler& handler = server_.handler_;
    std::string why = "closed";
    try {
      handler.onOpen(connection);
      why = readLoop(socket, *connection, connection, handler);
    } catch (const std::exception& e) {
      // The handler must not throw; if it does, this connection ends, the server goes on.
      why = fmt::format("internal error: {}", e.what());
      logger("driver")->error("connection {} ({}): {}", connection->id(), peer, why);
    }
    bool overflowed = false;
    {
      std::lock_guard lock(connection->mutex_);
      overflowed = connection->overflowed_;
    }
    if (overflowed) handler.onDropped(connection, DropReason::kStoppedReading);
    try {
      handler.onClose(connection, why);
    } catch (const std::exception& e) {
      logger("driver")->error("connection {} ({}): close handler failed: {}", connection->id(),
                              peer, e.what());
    }
    connection->close(why);
    connection->stopWriter();
    server_.untrack(connection);
  }

  std::string readLoop(WebSocket& socket, Connection& c, const std::shared_ptr<Connection>& shared,
                       FrameHandler& handler) {
    const ServerOptions& options = server_.options();
    net::FrameReader reader(options.max_frame_bytes);
    std::vector<char> buffer;
    std::string message;  // a text message being assembled from fragments
    bool in_message = false;
    bool greeted = false;
    for (;;) {
      // What the handler sent in answer to the frames read so far leaves before any wait.
      if (!reader.holdsFrame()) c.sendHeld();
      net::ReceivedFrame frame;
      try {
        frame = receiveFrame(socket, c, reader, buffer);
      } catch (const Poco::TimeoutException&) {
        if (!c.greeted()) {
          server_.handler_.onDropped(shared, DropReason::kNoHello);
          c.send(
              protocol::makeError(protocol::error_code::kTimeout,
                                  fmt::format("no Hello within {} ms", options.hello_timeout_ms)));
          c.close("no Hello in time");
          drainUntilClosed(socket, std::chrono::seconds(2));
          return "no Hello in time";
        }
        if (!handler.onIdle(shared)) return "idle";
        continue;
      } catch (const Poco::Net::WebSocketException& e) {
        if (e.code() == WebSocket::WS_ERR_PAYLOAD_TOO_BIG) {
          return refuseOversized(socket, shared, "a frame");
        }
        server_.handler_.onDropped(shared, DropReason::kBadWebSocket);
        return fmt::format("WebSocket error: {}", e.displayText());
      } catch (const Poco::Exception& e) {
        return fmt::format("connection error: {}", e.displayText());
      }
      if (c.greeted() && !greeted) {
        // After Hello the agent heartbeats; silence is judged by the driver's agent timeout.
        greeted = true;
        socket.setReceiveTimeout(Poco::Timespan(options.idle_timeout_ms * 1000));
      }
      if (frame.end_of_stream) return "the agent closed the connection";
      // Its payload is read and dropped already; the connection still ends (docs/protocol.md).
      if (frame.discarded) return refuseOversized(socket, shared, "a frame");
      const int opcode = frame.flags & WebSocket::FRAME_OP_BITMASK;
      switch (opcode) {
        case WebSocket::FRAME_OP_CLOSE:
          return "the agent closed the WebSocket";
        case WebSocket::FRAME_OP_PING:
          c.send(Connection::Control{int{WebSocket::FRAME_FLAG_FIN} | int{WebSocket::FRAME_OP_PONG},
                                     std::string(buffer.begin(), buffer.end())});
          continue;
        case WebSocket::FRAME_OP_PONG:
          continue;
        case WebSocket::FRAME_OP_TEXT:
        case WebSocket::FRAME_OP_BINARY:
          message.assign(buffer.begin(), buffer.end());
          in_message = true;
          break;
        case WebSocket::FRAME_OP_CONT:
          if (!in_message) {
            c.send(protocol::makeError(protocol::error_code::kMalformedFrame,
                                       "continuation frame without a message to continue"));
            continue;
          }
          if (message.size() + buffer.size() > options.max_frame_bytes) {
            return refuseOversized(socket, shared, "a fragmented message");
          }
          message.append(buffer.begin(), buffer.end());
          break;
        default:
          c.send(protocol::makeError(protocol::error_code::kMalformedFrame,
                                     fmt::format("unsupported WebSocket opcode {}", opcode)));
          continue;
      }
      if ((frame.flags & WebSocket::FRAME_FLAG_FIN) == 0) continue;
      in_message = false;
      handler.onFrame(shared, message);
      if (c.closing()) {
        // The handler closed it (e.g. a bad Hello); let the peer read why, then go.
        drainUntilClosed(socket, std::chrono::seconds(2));
        return "closed by the driver";
      }
    }
  }

  // The next frame. Over TLS it takes its turn with the writer (Connection::io_mutex_) only
  // once there is something to read, so an idle agent never holds up the driver's sends.
  // Throws Poco::TimeoutException when nothing comes within the socket's receive timeout.
  static net::ReceivedFrame receiveFrame(WebSocket& socket, Connection& c, net::FrameReader& reader,
                                         std::vector<char>& payload) {
    if (!c.secure_) return reader.next(socket, payload);
    {
      // Bytes may wait read ahead, or decrypted in the TLS layer, with nothing on the socket.
      std::lock_guard io(c.io_mutex_);
      if (reader.buffered() > 0 || socket.available() > 0) return reader.next(socket, payload);
    }
    if (!socket.poll(socket.getReceiveTimeout(), Poco::Net::Socket::SELECT_READ)) {
      throw Poco::TimeoutException();
    }
    std::lock_guard io(c.io_mutex_);
    return reader.next(socket, payload);
  }

  std::string refuseOversized(WebSocket& socket, const std::shared_ptr<Connection>& shared,
                              const char* what) {
    Connection& c = *shared;
    server_.handler_.onDropped(shared, DropReason::kFrameTooLarge);
    std::string why = fmt::format("{} larger than the limit of {} bytes", what,
                                  server_.options().max_frame_bytes);
    logger("driver")->warn("connection {} ({}): {}; closing it", c.id(), c.peer(), why);
    c.send(protocol::makeError(protocol::error_code::kFrameTooLarge, why));
    c.close(why);
    // The rest of the payload is still on the wire; read it away so that the peer gets our
    // Error and close frames instead of a reset.
    drainUntilClosed(socket, std::chrono::seconds(2));
    return why;
  }

  AgentServer& server_;
};

class WebSocketHandlerFactory : public Poco::Net::HTTPRequestHandlerFactory {
 public:
  explicit WebSocketHandlerFactory(AgentServer& server) : server_(server) {}
  Poco::Net::HTTPRequestHandler* createRequestHandler(
      const Poco::Net::HTTPServerRequest&) override {
    return new WebSocketHandler(server_);
  }

 private:
  AgentServer& server_;
};

// ---- AgentServer ----------------------------------------------------------------------------

// The most pool threads of a plain (ws://) server: HTTP requests and upgrades only.
constexpr int kPlainThreads = 16;

AgentServer::AgentServer(ServerOptions options, FrameHandler& handler)
    : options_(std::move(options)), handler_(handler) {}

AgentServer::~AgentServer() { stop(); }

void AgentServer::start() {
  Poco::Net::ServerSocket socket = tls::newServerSocket(
      Poco::Net::SocketAddress(options_.host, options_.port), 256, options_.tls);
  port_ = socket.address().port();
  reactor_ = std::make_unique<ConnectionReactor>(
      options_, handler_, [this](const std::shared_ptr<Connection>& c) { untrack(c); });
  reactor_->start();

  auto* params = new Poco::Net::HTTPServerParams;
  // Over ws:// a pool thread serves one HTTP request or upgrade and goes back (the reactor
  // serves the connection): a few are plenty, and a registration storm waits in the queue
  // instead of growing the pool. Over wss:// each agent holds one for its connection's life.
  const int threads = options_.tls ? options_.threads : std::min(options_.threads, kPlainThreads);
  params->setMaxThreads(threads);
  params->setMaxQueued(4096);
  params->setKeepAlive(true);
  params->setKeepAliveTimeout(Poco::Timespan(10, 0));
  params->setTimeout(Poco::Timespan(10, 0));  // for the HTTP request before the upgrade
  params->setServerName("dockhand-driver");
  pool_ = std::make_unique<Poco::ThreadPool>(2, threads + 2, 60);
  server_ = std::make_unique<tls::HttpServer>(
      new WebSocketHandlerFactory(*this), pool_.get(), socket, params, options_.tls,
      [](const std::string& peer, const std::string& why) {
        logger("driver")->warn("refused a connection from {}: TLS handshake failed: {}", peer, why);
      });
  server_->start();
}

void AgentServer::stop() {
  if (!server_) return;
  std::vector<std::shared_ptr<Connection>> open;
  {
    std::lock_guard lock(mutex_);
    if (stopping_) return;
    stopping_ = true;
    for (const auto& [id, c] : connections_) open.push_back(c);
  }
  for (const auto& c : open) c->close("the driver is shutting down");
  {
    std::unique_lock lock(mutex_);
    drained_.wait_for(lock, std::chrono::seconds(5), [&] { return connections_.empty(); });
  }
  server_->stopAll(true);
  pool_->joinAll();
  reactor_->stop();
}

void AgentServer::track(const std::shared_ptr<Connection>& c) {
  bool refuse = false;
  {
    std::lock_guard lock(mutex_);
    connections_.emplace(c->id(), c);
    refuse = stopping_;
  }
  if (refuse) c->close("the driver is shutting down");
}

void AgentServer::untrack(const std::shared_ptr<Connection>& c) {
  std::lock_guard lock(mutex_);
  connections_.erase(c->id());
  drained_.notify_all();
}

}  // namespace dockhand::driver
