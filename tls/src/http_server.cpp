#include "dockhand/tls/http_server.h"

#include <sys/socket.h>

#include <poll.h>

#include <cerrno>
#include <chrono>

#include <Poco/Exception.h>
#include <Poco/Net/HTTPServerConnectionFactory.h>
#include <Poco/Net/TCPServerConnection.h>
#include <Poco/Net/TCPServerConnectionFactory.h>
#include <Poco/Net/TCPServerDispatcher.h>
#include <Poco/ThreadPool.h>

#include "dockhand/tls/tls.h"
#include "tls_module.h"

namespace dockhand::tls {

namespace {

using Poco::Net::HTTPRequestHandlerFactory;
using Poco::Net::HTTPServerParams;
using Poco::Net::StreamSocket;

// The request handler factory the connections see: it hands each request to the server's
// factory, and it can tell the connections that the server stops (the event is protected).
class ForwardingFactory : public HTTPRequestHandlerFactory {
 public:
  explicit ForwardingFactory(HTTPRequestHandlerFactory::Ptr inner) : inner_(std::move(inner)) {}
  Poco::Net::HTTPRequestHandler* createRequestHandler(
      const Poco::Net::HTTPServerRequest& request) override {
    return inner_->createRequestHandler(request);
  }
  void announceStop(bool abort_current) { serverStopped(this, abort_current); }

 private:
  HTTPRequestHandlerFactory::Ptr inner_;
};

}  // namespace

HttpServer::HttpServer(const HTTPRequestHandlerFactory::Ptr& factory, Poco::ThreadPool* pool,
                       const Poco::Net::ServerSocket& socket, const HTTPServerParams::Ptr& params,
                       const Poco::Net::Context::Ptr& tls, HandshakeLog log)
    : factory_(new ForwardingFactory(factory)), listening_(socket) {
  Poco::Net::TCPServerConnectionFactory::Ptr connections;
  if (tls) {
    connections = module::api().handshake_first_factory(params, factory_, std::move(log));
  } else {
    connections = new Poco::Net::HTTPServerConnectionFactory(params, factory_);
  }
  dispatcher_ = new Poco::Net::TCPServerDispatcher(
      connections, pool != nullptr ? *pool : Poco::ThreadPool::defaultPool(), params);
}

HttpServer::~HttpServer() {
  try {
    stopAll(false);
  } catch (...) {  // NOLINT(bugprone-empty-catch): a destructor must not throw; the server is
                   // going either way
  }
  dispatcher_->release();
}

void HttpServer::start() {
  if (started_) return;
  started_ = true;
  acceptor_ = std::thread([this] { acceptLoop(); });
}

void HttpServer::acceptLoop() {
  const int fd = listening_.impl()->sockfd();
  while (!stopped_.load()) {
    pollfd ready{.fd = fd, .events = POLLIN, .revents = 0};
    if (::poll(&ready, 1, -1) < 0) {
      if (errno == EINTR) continue;
      return;  // the socket is gone: nothing more can be accepted
    }
    if (stopped_.load()) return;
    try {
      Poco::Net::StreamSocket connection = listening_.acceptConnection();
      connection.setNoDelay(true);
      dispatcher_->enqueue(connection);
    } catch (const Poco::Exception&) {
      // Out of descriptors, or a connection reset before it was taken: as Poco's own loop
      // does, give the machine a moment before the next try (only while that lasts).
      if (!stopped_.load()) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
}

void HttpServer::stopAll(bool abort_current) {
  if (stopped_.exchange(true)) return;
  // A shut-down listening socket is readable at once (and refuses new connections): the
  // accept loop wakes and sees the flag.
  ::shutdown(listening_.impl()->sockfd(), SHUT_RDWR);
  if (acceptor_.joinable()) acceptor_.join();
  dispatcher_->stop();
  static_cast<ForwardingFactory*>(factory_.get())->announceStop(abort_current);
}

}  // namespace dockhand::tls
