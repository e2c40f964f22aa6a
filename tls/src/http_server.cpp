#include "dockhand/tls/http_server.h"

#include <sys/socket.h>

#include <Poco/Exception.h>
#include <Poco/Net/HTTPServer.h>
#include <Poco/Net/TCPServer.h>
#include <Poco/Net/TCPServerConnection.h>
#include <Poco/Net/TCPServerConnectionFactory.h>
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
    : factory_(factory), listening_(socket) {
  if (!tls) {
    plain_ = pool != nullptr
                 ? std::make_unique<Poco::Net::HTTPServer>(factory, *pool, socket, params)
                 : std::make_unique<Poco::Net::HTTPServer>(factory, socket, params);
    return;
  }
  forwarding_ = new ForwardingFactory(factory);
  factory_ = forwarding_;
  auto* connections = module::api().handshake_first_factory(params, factory_, std::move(log));
  secure_ = pool != nullptr
                ? std::make_unique<Poco::Net::TCPServer>(connections, *pool, socket, params)
                : std::make_unique<Poco::Net::TCPServer>(connections, socket, params);
}

HttpServer::~HttpServer() = default;

void HttpServer::start() {
  if (plain_) {
    plain_->start();
  } else {
    secure_->start();
  }
}

void HttpServer::stopAll(bool abort_current) {
  // Poco's accept loop polls the listening socket every 250 ms and looks at its stop flag in
  // between, so stopping waits up to that long. A shut-down listening socket is readable at
  // once (and refuses new connections): the loop comes round as soon as the flag is set.
  ::shutdown(listening_.impl()->sockfd(), SHUT_RDWR);
  if (plain_) {
    plain_->stopAll(abort_current);
    return;
  }
  secure_->stop();
  static_cast<ForwardingFactory*>(forwarding_)->announceStop(abort_current);
}

}  // namespace dockhand::tls
