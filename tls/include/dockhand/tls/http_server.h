// HttpServer: a Poco HTTP server that serves plain http:// as Poco::Net::HTTPServer does, or,
// with a TLS server context, https:// with every failed handshake logged.
//
// Poco's own HTTPServer over a SecureServerSocket drops a connection whose handshake fails
// (a plain client, a certificate that does not verify) without a word. Here each connection
// completes its handshake first, within the params' timeout; a failure is handed to the
// HandshakeLog with the peer's address and an explanation (explainFailure), and the
// connection is closed. A good one is then served by Poco's HTTPServerConnection, as
// HTTPServer would serve it.
//
// The accept loop is its own: Poco's TCPServer wakes four times a second to look at its stop
// flag, so every idle agent and driver did too. This one sleeps in epoll until a connection
// comes or stopAll() shuts the listening socket down. An accepted connection waits in that
// epoll, not on a pool thread, until its first bytes arrive (or is closed after the params'
// timeout), and is then served by Poco's TCPServerDispatcher on the pool, as TCPServer serves
// them: a client slow to send holds no thread, and a storm of connections does not grow the
// pool.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include <Poco/Net/Context.h>
#include <Poco/Net/HTTPRequestHandlerFactory.h>
#include <Poco/Net/HTTPServerParams.h>
#include <Poco/Net/ServerSocket.h>
#include <Poco/Net/StreamSocket.h>

namespace Poco {
class ThreadPool;
namespace Net {
class TCPServerDispatcher;
}  // namespace Net
}  // namespace Poco

namespace dockhand::tls {

// Told about each failed handshake: the peer's address ("127.0.0.1:53412") and why. A plain
// server tells it about each client that started TLS (the connection is closed at once).
using HandshakeLog = std::function<void(const std::string& peer, const std::string& why)>;

class HttpServer {
 public:
  // `pool`: the threads to serve on (nullptr: Poco's default pool). `tls` null: plain HTTP.
  HttpServer(const Poco::Net::HTTPRequestHandlerFactory::Ptr& factory, Poco::ThreadPool* pool,
             const Poco::Net::ServerSocket& socket, const Poco::Net::HTTPServerParams::Ptr& params,
             const Poco::Net::Context::Ptr& tls, HandshakeLog log);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  void start();
  // As HTTPServer::stopAll: stops accepting, and with `abort_current` ends the connections
  // that wait for their next request.
  void stopAll(bool abort_current);

 private:
  void acceptLoop();
  bool refusedTls(const Poco::Net::StreamSocket& socket);

  Poco::Net::HTTPRequestHandlerFactory::Ptr factory_;  // a ForwardingFactory over the caller's
  Poco::Net::ServerSocket listening_;
  std::int64_t params_timeout_us_;  // how long an accepted connection may wait for its first byte
  Poco::Net::Context::Ptr tls_;     // null: plain
  HandshakeLog log_;
  Poco::Net::TCPServerDispatcher* dispatcher_ = nullptr;  // reference-counted by Poco
  std::atomic<bool> stopped_{false};
  bool started_ = false;
  std::thread acceptor_;
};

}  // namespace dockhand::tls
