#include "dockhand/tls/http_server.h"

#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <deque>
#include <string_view>
#include <thread>
#include <tuple>
#include <unordered_map>

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
    : factory_(new ForwardingFactory(factory)),
      listening_(socket),
      params_timeout_us_(params->getTimeout().totalMicroseconds()),
      tls_(tls),
      log_(std::move(log)) {
  Poco::Net::TCPServerConnectionFactory::Ptr connections;
  if (tls) {
    connections = module::api().handshake_first_factory(params, factory_, tls, log_);
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
  using Clock = std::chrono::steady_clock;
  const int listening = listening_.impl()->sockfd();
  const int epoll = ::epoll_create1(EPOLL_CLOEXEC);
  if (epoll < 0) return;
  epoll_event event{};
  event.events = EPOLLIN;
  event.data.fd = listening;
  if (::epoll_ctl(epoll, EPOLL_CTL_ADD, listening, &event) != 0) {
    ::close(epoll);
    return;
  }
  // Accepted connections wait here, not on a pool thread, until their first bytes come (the
  // HTTP request, or a TLS ClientHello): a client slow to send never holds a thread, and a
  // storm of connections does not grow the pool. One that sends nothing within the params'
  // timeout is closed.
  struct Waiting {
    StreamSocket socket;
    std::uint64_t number = 0;
  };
  std::unordered_map<int, Waiting> waiting;
  std::deque<std::tuple<Clock::time_point, int, std::uint64_t>> deadlines;  // in accept order
  std::uint64_t accepted = 0;
  const auto patience = std::chrono::microseconds(params_timeout_us_);
  std::array<epoll_event, 64> events{};
  while (!stopped_.load()) {
    int wait_ms = -1;
    if (!deadlines.empty()) {
      const auto left = std::get<0>(deadlines.front()) - Clock::now();
      wait_ms = static_cast<int>(
          std::max<std::int64_t>(0, std::chrono::ceil<std::chrono::milliseconds>(left).count()));
    }
    const int n = ::epoll_wait(epoll, events.data(), static_cast<int>(events.size()), wait_ms);
    if (n < 0 && errno != EINTR) break;
    if (stopped_.load()) break;
    for (int i = 0; i < n; ++i) {
      const int fd = events[static_cast<std::size_t>(i)].data.fd;
      if (fd != listening) {
        auto it = waiting.find(fd);
        if (it == waiting.end()) continue;
        ::epoll_ctl(epoll, EPOLL_CTL_DEL, fd, nullptr);
        if (!refusedTls(it->second.socket)) dispatcher_->enqueue(it->second.socket);
        waiting.erase(it);
        continue;
      }
      try {
        StreamSocket connection = listening_.acceptConnection();
        connection.setNoDelay(true);
        const int socket_fd = connection.impl()->sockfd();
        epoll_event ready{};
        ready.events = EPOLLIN | EPOLLRDHUP;
        ready.data.fd = socket_fd;
        if (::epoll_ctl(epoll, EPOLL_CTL_ADD, socket_fd, &ready) != 0) {
          dispatcher_->enqueue(connection);  // served as before, on a pool thread
          continue;
        }
        waiting[socket_fd] = Waiting{connection, ++accepted};
        deadlines.emplace_back(Clock::now() + patience, socket_fd, accepted);
      } catch (const Poco::Exception&) {
        // Out of descriptors, or a connection reset before it was taken: as Poco's own loop
        // does, give the machine a moment before the next try (only while that lasts).
        if (!stopped_.load()) std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
    }
    const auto now = Clock::now();
    while (!deadlines.empty() && std::get<0>(deadlines.front()) <= now) {
      const auto [at, fd, number] = deadlines.front();
      deadlines.pop_front();
      auto it = waiting.find(fd);
      if (it == waiting.end() || it->second.number != number) continue;  // served already
      ::epoll_ctl(epoll, EPOLL_CTL_DEL, fd, nullptr);
      waiting.erase(it);  // closes it
    }
  }
  ::close(epoll);
}

// A plain server's client that starts a TLS handshake (its first byte is a TLS handshake
// record's, 22) would otherwise be read as an HTTP request, and wait for the request's end
// until the timeout. It is answered at once with a plain 400, which its TLS reads as a record
// that is not TLS ("wrong version number"), and the connection is closed; the log says why.
bool HttpServer::refusedTls(const StreamSocket& socket) {
  if (tls_) return false;
  constexpr unsigned char kTlsHandshakeRecord = 22;
  const int fd = socket.impl()->sockfd();
  std::array<char, 4096> hello{};
  const ssize_t got = ::recv(fd, hello.data(), hello.size(), MSG_PEEK | MSG_DONTWAIT);
  if (got < 1 || static_cast<unsigned char>(hello[0]) != kTlsHandshakeRecord) return false;
  // Read what came (a close with unread bytes would reset the connection before the answer).
  [[maybe_unused]] auto taken = ::recv(fd, hello.data(), hello.size(), MSG_DONTWAIT);
  constexpr std::string_view kAnswer =
      "HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain\r\nContent-Length: 47\r\n"
      "Connection: close\r\n\r\nthis port speaks plain HTTP and WebSocket only\n";
  [[maybe_unused]] auto sent =
      ::send(fd, kAnswer.data(), kAnswer.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  ::shutdown(fd, SHUT_WR);
  if (log_) {
    std::string peer = "unknown peer";
    try {
      peer = socket.peerAddress().toString();
    } catch (const Poco::Exception&) {
      // Gone already: the peer stays unnamed.
    }
    log_(peer, "the client started TLS, but this port serves plain http:// and ws:// (TLS is off)");
  }
  return true;
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
