#include "dockhand/driver/agent_server.h"

#include <algorithm>
#include <chrono>
#include <istream>
#include <vector>

#include <Poco/Net/HTTPRequestHandler.h>
#include <Poco/Net/HTTPRequestHandlerFactory.h>
#include <Poco/Net/HTTPServerParams.h>
#include <Poco/Net/HTTPServerRequest.h>
#include <Poco/Net/HTTPServerRequestImpl.h>
#include <Poco/Net/HTTPServerResponse.h>
#include <Poco/Net/ServerSocket.h>
#include <Poco/Net/SocketAddress.h>
#include <Poco/Net/WebSocket.h>
#include <Poco/ThreadPool.h>
#include <Poco/URI.h>

#include "dockhand/base/logging.h"
#include "dockhand/tls/http_server.h"
#include "dockhand/tls/tls.h"

#include "connection_reactor.h"

namespace dockhand::driver {

using Poco::Net::WebSocket;

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
    // The connection under the request: over wss:// the reactor drives its TLS itself.
    const Poco::Net::StreamSocket connection =
        static_cast<Poco::Net::HTTPServerRequestImpl&>(request).socket();
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
    tls::NonBlockingStream* stream = nullptr;
    if (socket->secure()) {
      // The server's TLS connections are the TLS module's own (loaded already: it made this
      // one); one that is not cannot be served here, and goes.
      stream = tls::nonBlockingStream(connection);
      if (stream == nullptr) {
        logger("driver")->error("connection from {}: its TLS cannot be served without blocking",
                                peer);
        return;
      }
    }
    adopt(*socket, peer, stream);
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

  // The reactor serves the connection from here, and this pool thread goes back.
  void adopt(WebSocket& socket, const std::string& peer, tls::NonBlockingStream* stream) {
    socket.setNoDelay(true);
    auto connection = std::make_shared<Connection>(server_.next_connection_id_++, peer,
                                                   server_.options().max_queued_frames);
    connection->attach(server_.reactor_.get());
    server_.track(connection);
    server_.reactor_->adopt(std::move(connection), socket, stream);
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

// The most pool threads: HTTP requests, TLS handshakes and upgrades only.
constexpr int kPoolThreads = 16;

AgentServer::AgentServer(ServerOptions options, FrameHandler& handler)
    : options_(std::move(options)), handler_(handler) {}

AgentServer::~AgentServer() { stop(); }

void AgentServer::start() {
  Poco::Net::ServerSocket socket =
      tls::newServerSocket(Poco::Net::SocketAddress(options_.host, options_.port), 256);
  port_ = socket.address().port();
  reactor_ = std::make_unique<ConnectionReactor>(
      options_, handler_, [this](const std::shared_ptr<Connection>& c) { untrack(c); });
  reactor_->start();

  auto* params = new Poco::Net::HTTPServerParams;
  // A pool thread serves one HTTP request, or a TLS handshake and an upgrade, and goes back (the
  // reactor serves the connection): a few are plenty, and a registration storm waits in the
  // queue instead of growing the pool.
  const int threads = std::min(options_.threads, kPoolThreads);
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
