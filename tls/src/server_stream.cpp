// The server side of a TLS connection, in the TLS module: OpenSSL driven directly over the
// accepted socket, so that the same connection can be served blocking (Poco's HTTP server reads
// the request and answers it, or upgrades it to a WebSocket, on a pool thread) and then without
// blocking (the driver's connection reactor, tls::NonBlockingStream). Poco's own
// SecureStreamSocketImpl cannot be handed over that way: whether it waits is fixed by a socket
// inside it that no caller can reach.
//
// The descriptor is non-blocking from the start. In blocking use a read or a write that OpenSSL
// cannot finish now waits in poll(2) for the socket, up to its receive or send timeout (0: no
// limit), as a blocking socket would; a write goes out whole. Errors are Poco's exceptions with
// OpenSSL's words (e.g. "SSL Exception: error:0A000418:SSL routines::tlsv1 alert unknown ca"),
// so that tls::explainFailure reads them as it reads Poco's.
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <time.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <limits>
#include <string>

#include <Poco/Exception.h>
#include <Poco/Net/HTTPServerConnection.h>
#include <Poco/Net/NetException.h>
#include <Poco/Net/SSLException.h>
#include <Poco/Net/StreamSocketImpl.h>
#include <Poco/Net/TCPServerConnection.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include "tls_module.h"

namespace dockhand::tls::module {

namespace {

using Poco::Net::HTTPRequestHandlerFactory;
using Poco::Net::HTTPServerParams;
using Status = NonBlockingStream::Status;
using Io = NonBlockingStream::Io;

// OpenSSL writes to the socket with write(2), which raises SIGPIPE when the peer has gone: while
// one lives, SIGPIPE is blocked on this thread, and one raised meanwhile is taken before the
// thread's mask is put back, so that a peer that went only fails the write (EPIPE), in any
// process (the agent and the driver ignore SIGPIPE; a test or a third party's program may not).
// Around the blocking writes, the handshake and close_notify; NonBlockingStream::write, the
// reactor's, leaves it to its caller (tls.h), which saves two system calls a write.
class QuietPipe {
 public:
  QuietPipe() {
    sigemptyset(&pipe_);
    sigaddset(&pipe_, SIGPIPE);
    sigset_t pending;
    sigemptyset(&pending);
    // One already pending is not ours to take.
    was_pending_ = sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE) == 1;
    blocked_ = pthread_sigmask(SIG_BLOCK, &pipe_, &old_) == 0;
  }
  ~QuietPipe() {
    if (!blocked_) return;
    const int error = errno;  // the write's, for whoever reads it next
    if (!was_pending_) {
      const timespec none{0, 0};
      while (sigtimedwait(&pipe_, nullptr, &none) == SIGPIPE) {
      }
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
    errno = error;
  }
  QuietPipe(const QuietPipe&) = delete;
  QuietPipe& operator=(const QuietPipe&) = delete;

 private:
  sigset_t pipe_{};
  sigset_t old_{};
  bool blocked_ = false;
  bool was_pending_ = false;
};

class ServerTlsSocketImpl final : public Poco::Net::StreamSocketImpl, public NonBlockingStream {
 public:
  ServerTlsSocketImpl(const Poco::Net::StreamSocket& plain, const Poco::Net::Context::Ptr& context)
      : Poco::Net::StreamSocketImpl(plain.impl()->sockfd()), plain_(plain) {
    ssl_ = SSL_new(context->sslContext());
    if (ssl_ == nullptr) throw Poco::Net::SSLException(takeOpensslError("SSL_new failed"));
    // Writes may return part of what was asked, and be retried from a buffer that moved: the
    // reactor keeps appending frames to what it writes.
    SSL_set_mode(ssl_, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER |
                           SSL_MODE_RELEASE_BUFFERS);
    plain_.impl()->setBlocking(false);
    if (SSL_set_fd(ssl_, sockfd()) != 1) {
      SSL_free(ssl_);
      ssl_ = nullptr;
      throw Poco::Net::SSLException(takeOpensslError("SSL_set_fd failed"));
    }
    SSL_set_accept_state(ssl_);
  }

  ~ServerTlsSocketImpl() override { release(); }
  ServerTlsSocketImpl(const ServerTlsSocketImpl&) = delete;
  ServerTlsSocketImpl& operator=(const ServerTlsSocketImpl&) = delete;

  // The handshake, within `timeout` (0: no limit). Throws SSLException (the peer's or our
  // refusal), SSLConnectionUnexpectedlyClosedException, or TimeoutException.
  void handshake(const Poco::Timespan& timeout) {
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::microseconds(timeout.totalMicroseconds());
    for (;;) {
      ERR_clear_error();
      int rc = 0;
      {
        const QuietPipe quiet;
        rc = SSL_do_handshake(ssl_);
      }
      if (rc == 1) return;
      const int error = SSL_get_error(ssl_, rc);
      if (error == SSL_ERROR_WANT_READ || error == SSL_ERROR_WANT_WRITE) {
        int left_ms = -1;
        if (timeout.totalMicroseconds() > 0) {
          left_ms = static_cast<int>(std::max<std::int64_t>(
              0, std::chrono::ceil<std::chrono::milliseconds>(deadline -
                                                              std::chrono::steady_clock::now())
                     .count()));
        }
        if (!wait(error == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT, left_ms)) {
          throw Poco::TimeoutException("no TLS handshake in time");
        }
        continue;
      }
      if (error == SSL_ERROR_SYSCALL && ERR_peek_error() == 0) {
        if (rc < 0 && errno == EINTR) continue;
        throw Poco::Net::SSLConnectionUnexpectedlyClosedException();
      }
      const std::string why = takeOpensslError("handshake failed");
      if (why.find("unexpected eof") != std::string::npos) {
        throw Poco::Net::SSLConnectionUnexpectedlyClosedException(why);
      }
      throw Poco::Net::SSLException(why);
    }
  }

  // ---- Poco::Net::StreamSocketImpl: blocking use ----------------------------------------------

  int sendBytes(const void* buffer, int length, int /*flags*/) override {
    if (!blocking_)
      return nonBlockingResult(write(static_cast<const char*>(buffer), clamp(length)));
    const char* data = static_cast<const char*>(buffer);
    const QuietPipe quiet;
    int sent = 0;
    while (sent < length) {
      const Io io = write(data + sent, static_cast<std::size_t>(length - sent));
      if (io.status == Status::kDone) {
        sent += static_cast<int>(io.bytes);
      } else if (io.status == Status::kWantRead || io.status == Status::kWantWrite) {
        if (!wait(io.status == Status::kWantRead ? POLLIN : POLLOUT, timeoutMs(getSendTimeout()))) {
          throw Poco::TimeoutException("TLS send timed out");
        }
      } else {
        throw Poco::Net::SSLException(io.error);
      }
    }
    return sent;
  }

  int receiveBytes(void* buffer, int length, int /*flags*/) override {
    for (;;) {
      const Io io = read(static_cast<char*>(buffer), clamp(length));
      if (io.status == Status::kDone) return static_cast<int>(io.bytes);
      if (io.status == Status::kClosed) return 0;
      if (io.status == Status::kFailed) throw Poco::Net::SSLException(io.error);
      if (!blocking_) return nonBlockingResult(io);
      if (!wait(io.status == Status::kWantRead ? POLLIN : POLLOUT,
                timeoutMs(getReceiveTimeout()))) {
        throw Poco::TimeoutException("TLS receive timed out");
      }
    }
  }

  int available() override { return ssl_ != nullptr ? SSL_pending(ssl_) : 0; }
  bool secure() const override { return true; }
  // Whether its reads and writes wait; the descriptor itself never blocks.
  void setBlocking(bool flag) override { blocking_ = flag; }
  bool getBlocking() const override { return blocking_; }

  void shutdownSend() override {
    closeNotify();
    ::shutdown(sockfd(), SHUT_WR);
  }
  void shutdown() override {
    closeNotify();
    ::shutdown(sockfd(), SHUT_RDWR);
  }
  void close() override { release(); }

  // ---- NonBlockingStream ----------------------------------------------------------------------

  Io read(char* data, std::size_t size) override {
    if (ssl_ == nullptr) return Io{Status::kFailed, 0, "the connection is closed"};
    ERR_clear_error();
    std::size_t got = 0;
    const int rc = SSL_read_ex(ssl_, data, size, &got);
    if (rc == 1) return Io{Status::kDone, got, {}};
    return failure(rc, "TLS read failed");
  }

  Io write(const char* data, std::size_t size) override {
    if (ssl_ == nullptr) return Io{Status::kFailed, 0, "the connection is closed"};
    if (size == 0) return Io{Status::kDone, 0, {}};
    ERR_clear_error();
    std::size_t put = 0;
    const int rc = SSL_write_ex(ssl_, data, size, &put);
    if (rc == 1) return Io{Status::kDone, put, {}};
    return failure(rc, "TLS write failed");
  }

  bool pending() const override { return ssl_ != nullptr && SSL_pending(ssl_) > 0; }

  void closeNotify() override {
    if (ssl_ == nullptr || (SSL_get_shutdown(ssl_) & SSL_SENT_SHUTDOWN) != 0) return;
    if (SSL_is_init_finished(ssl_) == 0) return;
    ERR_clear_error();
    const QuietPipe quiet;
    SSL_shutdown(ssl_);  // once: the peer's close_notify is not waited for
    ERR_clear_error();
  }

  NonBlockingStream* nonBlocking() {
    blocking_ = false;
    return this;
  }

 private:
  static std::size_t clamp(int length) { return static_cast<std::size_t>(std::max(0, length)); }
  static int timeoutMs(const Poco::Timespan& timeout) {
    if (timeout.totalMicroseconds() <= 0) return -1;
    return static_cast<int>(std::min<Poco::Timespan::TimeDiff>(
        std::numeric_limits<int>::max(), (timeout.totalMicroseconds() + 999) / 1000));
  }
  // Poco's convention for a socket that would block: -1 (want read), -2 (want write).
  static int nonBlockingResult(const Io& io) {
    switch (io.status) {
      case Status::kDone:
        return static_cast<int>(io.bytes);
      case Status::kWantRead:
        return -1;
      case Status::kWantWrite:
        return -2;
      case Status::kClosed:
        return 0;
      case Status::kFailed:
        break;
    }
    throw Poco::Net::SSLException(io.error);
  }

  // Waits until the socket is ready for `events`; false when `timeout_ms` passed first.
  bool wait(short events, int timeout_ms) const {
    pollfd p{sockfd(), events, 0};
    for (;;) {
      const int ready = ::poll(&p, 1, timeout_ms);
      if (ready > 0) return true;
      if (ready == 0) return false;
      if (errno != EINTR) return true;  // the next call meets the error
    }
  }

  Io failure(int rc, const char* what) {
    const int error = SSL_get_error(ssl_, rc);
    switch (error) {
      case SSL_ERROR_WANT_READ:
        return Io{Status::kWantRead, 0, {}};
      case SSL_ERROR_WANT_WRITE:
        return Io{Status::kWantWrite, 0, {}};
      case SSL_ERROR_ZERO_RETURN:
        return Io{Status::kClosed, 0, {}};  // the peer's close_notify
      case SSL_ERROR_SYSCALL:
        if (ERR_peek_error() == 0) {
          if (errno == EINTR) return Io{Status::kWantRead, 0, {}};
          if (errno == 0 || errno == ECONNRESET || errno == EPIPE) {
            return Io{Status::kClosed, 0, {}};  // closed without close_notify
          }
          return Io{Status::kFailed, 0, std::strerror(errno)};
        }
        break;
      default:
        break;
    }
    std::string why = takeOpensslError(what);
    // A peer that closes the TCP connection without close_notify: closed, as over ws://.
    if (why.find("unexpected eof") != std::string::npos) return Io{Status::kClosed, 0, {}};
    return Io{Status::kFailed, 0, std::move(why)};
  }

  void release() {
    closeNotify();
    if (ssl_ != nullptr) {
      SSL_free(ssl_);
      ssl_ = nullptr;
    }
    reset();  // the descriptor is the plain socket's to close
    plain_.close();
  }

  Poco::Net::StreamSocket plain_;  // owns the descriptor
  SSL* ssl_ = nullptr;
  bool blocking_ = true;
};

// Completes the TLS handshake, then serves HTTP on the connection as HTTPServer does.
class HandshakeFirstConnection : public Poco::Net::TCPServerConnection {
 public:
  HandshakeFirstConnection(const Poco::Net::StreamSocket& socket, HTTPServerParams::Ptr params,
                           HTTPRequestHandlerFactory::Ptr factory, Poco::Net::Context::Ptr context,
                           const HandshakeLog& log)
      : TCPServerConnection(socket),
        params_(std::move(params)),
        factory_(std::move(factory)),
        context_(std::move(context)),
        log_(log) {}

  void run() override {
    std::string peer = "unknown peer";
    Poco::Net::StreamSocket secure;
    try {
      peer = socket().peerAddress().toString();
      auto* impl = new ServerTlsSocketImpl(socket(), context_);
      secure = Poco::Net::StreamSocket(impl);  // owns impl from here
      // A client that connects and says nothing must not hold a thread for ever.
      secure.setReceiveTimeout(params_->getTimeout());
      secure.setSendTimeout(params_->getTimeout());
      impl->handshake(params_->getTimeout());
    } catch (const Poco::Exception& e) {
      if (log_) log_(peer, explainFailure(e));
      return;
    }
    Poco::Net::HTTPServerConnection http(secure, params_, factory_);
    http.run();
  }

 private:
  HTTPServerParams::Ptr params_;
  HTTPRequestHandlerFactory::Ptr factory_;
  Poco::Net::Context::Ptr context_;
  const HandshakeLog& log_;
};

class HandshakeFirstFactory : public Poco::Net::TCPServerConnectionFactory {
 public:
  HandshakeFirstFactory(HTTPServerParams::Ptr params, HTTPRequestHandlerFactory::Ptr factory,
                        Poco::Net::Context::Ptr context, HandshakeLog log)
      : params_(std::move(params)),
        factory_(std::move(factory)),
        context_(std::move(context)),
        log_(std::move(log)) {}

  Poco::Net::TCPServerConnection* createConnection(const Poco::Net::StreamSocket& socket) override {
    return new HandshakeFirstConnection(socket, params_, factory_, context_, log_);
  }

 private:
  HTTPServerParams::Ptr params_;
  HTTPRequestHandlerFactory::Ptr factory_;
  Poco::Net::Context::Ptr context_;
  HandshakeLog log_;  // outlives every connection: the server joins them before it goes
};

}  // namespace

Poco::Net::TCPServerConnectionFactory* handshakeFirstFactory(
    const HTTPServerParams::Ptr& params, const HTTPRequestHandlerFactory::Ptr& factory,
    const Poco::Net::Context::Ptr& context, HandshakeLog log) {
  return new HandshakeFirstFactory(params, factory, context, std::move(log));
}

NonBlockingStream* nonBlockingStream(const Poco::Net::StreamSocket& socket) {
  auto* impl = dynamic_cast<ServerTlsSocketImpl*>(socket.impl());
  return impl != nullptr ? impl->nonBlocking() : nullptr;
}

}  // namespace dockhand::tls::module
