// AgentServer: the WebSocket endpoint agents connect to (Poco HTTPServer; the upgrade is
// accepted on any path), ws:// or, with a TLS context, wss:// only. Plain HTTP requests go to
// FrameHandler::onHttpRequest (the driver's control API), except GET /healthz. It owns transport
// only: frame size limit, ping/pong, close, and one outbound queue per connection; what the frames
// mean is the FrameHandler's business.
//
// Threads: the HTTP request (and, over wss://, the TLS handshake before it; then the WebSocket
// upgrade) is read on a small pool. The upgraded connection, ws:// or wss://, is then served by
// the ConnectionReactor: one thread and epoll for all of them, which reads frames, calls the
// handler (onOpen, onFrame..., onClose: in that order, on that thread) and writes each
// connection's queue as its socket takes it; the pool thread returns. Sending never blocks the
// caller on the network, and a slow or stuck agent only fills its own queue (beyond
// max_queued_frames it is dropped).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include <Poco/Net/Context.h>

#include "dockhand/driver/defaults.h"
#include "dockhand/driver/drop_reason.h"
#include "dockhand/protocol/envelope.h"
#include "dockhand/protocol/messages.h"

namespace Poco {
class ThreadPool;
namespace Net {
class WebSocket;
}  // namespace Net
}  // namespace Poco

namespace dockhand::tls {
class HttpServer;
}  // namespace dockhand::tls

namespace dockhand::driver {

class ConnectionReactor;

struct ServerOptions {
  std::string host = "127.0.0.1";
  std::uint16_t port = 0;  // 0: an ephemeral port; read it back with AgentServer::port()
  std::size_t max_frame_bytes = protocol::kDefaultMaxFrameBytes;
  int threads = defaults::kServerThreads;
  // Receive timeout until the handler calls markGreeted().
  long hello_timeout_ms = defaults::kHelloTimeoutMs;
  // Receive timeout afterwards (then onIdle decides).
  long idle_timeout_ms = defaults::kAgentTimeoutMs;
  std::size_t max_queued_frames = defaults::kMaxQueuedFrames;
  // Set: serve wss:// (and the control API https://) with this server context.
  Poco::Net::Context::Ptr tls;
};

// What a FrameHandler keeps with each connection (Connection::context): the server holds it
// for the connection's life and never looks inside.
class ConnectionContext {
 public:
  ConnectionContext() = default;
  virtual ~ConnectionContext() = default;
  ConnectionContext(const ConnectionContext&) = delete;
  ConnectionContext& operator=(const ConnectionContext&) = delete;
};

// One agent's connection: transport only (what its frames mean is the FrameHandler's). send()
// and close() may be called from any thread.
class Connection {
 public:
  // A WebSocket control frame (pong).
  struct Control {
    int flags = 0;
    std::string payload;
  };
  // An encoded frame, an envelope, or a task launch (both encoded on the reactor's thread).
  using Outbound = std::variant<std::string, protocol::Envelope, protocol::LaunchTask, Control>;

  Connection(std::uint64_t id, std::string peer, std::size_t max_queued);
  ~Connection() = default;
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  std::uint64_t id() const { return id_; }
  const std::string& peer() const { return peer_; }

  // Queues a frame (encoded on the reactor's thread). False when the connection is closing.
  bool send(Outbound frame);
  // Sends what is queued, then a close frame, then shuts the socket down. Idempotent.
  void close(const std::string& reason);
  bool closing() const { return closing_.load(); }

  // The handler says the handshake is done: the receive timeout becomes idle_timeout_ms
  // (hello_timeout_ms before). The handler's calls only (the reactor's thread).
  void markGreeted() { greeted_ = true; }
  bool greeted() const { return greeted_; }

  // What the handler keeps with this connection (DriverService: the agent's session), set in
  // onOpen; the server never looks inside. Touched only by the reactor's thread.
  std::unique_ptr<ConnectionContext> context;

 private:
  friend class WebSocketHandler;
  friend class ConnectionReactor;
  // Served by `reactor`, which writes its frames.
  void attach(ConnectionReactor* reactor) { reactor_ = reactor; }
  // Encodes `item` into `text`; returns its WebSocket flags.
  static int encode(Outbound& item, std::string& text);

  const std::uint64_t id_;
  const std::string peer_;
  bool greeted_ = false;  // the reactor's thread only
  const std::size_t max_queued_;
  std::mutex mutex_;
  std::deque<Outbound> queue_;
  std::string close_reason_;
  std::atomic<bool> closing_{false};
  ConnectionReactor* reactor_ = nullptr;
  bool wake_pending_ = false;  // the reactor was woken for queue_ (mutex_)
  bool overflowed_ = false;  // closed at max_queued_: dropped at once, not closed in turn (mutex_)
};

// A plain HTTP request to the driver's port other than GET /healthz (the control API).
struct ControlRequest {
  std::string method;
  std::string path;  // the request target without its query
  std::string body;
  std::string authorization;  // the Authorization header; "" when there is none
};

// The answer to a plain HTTP request (one that is not a WebSocket upgrade).
struct HttpReply {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // extra response headers
};

// What the frames mean: implemented by DriverService (and by tests).
class FrameHandler {
 public:
  virtual ~FrameHandler() = default;
  // The transport drops `connection` for `reason` (onClose follows). Must not throw.
  virtual void onDropped(const std::shared_ptr<Connection>& connection, DropReason reason) {
    (void)connection;
    (void)reason;
  }
  // A plain HTTP request other than GET /healthz, on a pool thread; nullopt: not handled
  // (answered 426, agents connect with a WebSocket). Must not throw.
  virtual std::optional<HttpReply> onHttpRequest(const ControlRequest& request) {
    (void)request;
    return std::nullopt;
  }
  virtual void onOpen(const std::shared_ptr<Connection>& connection) = 0;
  virtual void onFrame(const std::shared_ptr<Connection>& connection, std::string_view frame) = 0;
  // No frame within the receive timeout. Return false to close the connection.
  virtual bool onIdle(const std::shared_ptr<Connection>& connection) = 0;
  virtual void onClose(const std::shared_ptr<Connection>& connection, const std::string& why) = 0;
};

class AgentServer {
 public:
  AgentServer(ServerOptions options, FrameHandler& handler);
  ~AgentServer();
  AgentServer(const AgentServer&) = delete;
  AgentServer& operator=(const AgentServer&) = delete;

  // Binds and starts serving. Throws Poco::Exception (e.g. address in use).
  void start();
  // Closes every connection and stops. Idempotent.
  void stop();
  std::uint16_t port() const { return port_; }
  const ServerOptions& options() const { return options_; }

 private:
  friend class WebSocketHandler;
  void track(const std::shared_ptr<Connection>& c);
  void untrack(const std::shared_ptr<Connection>& c);

  ServerOptions options_;
  FrameHandler& handler_;
  std::unique_ptr<Poco::ThreadPool> pool_;
  std::unique_ptr<ConnectionReactor> reactor_;  // serves every upgraded connection
  std::unique_ptr<tls::HttpServer> server_;
  std::uint16_t port_ = 0;
  std::atomic<std::uint64_t> next_connection_id_{1};
  std::mutex mutex_;
  std::condition_variable drained_;
  std::map<std::uint64_t, std::shared_ptr<Connection>> connections_;
  bool stopping_ = false;
};

}  // namespace dockhand::driver
