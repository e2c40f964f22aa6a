#include "rpc/websocket_link.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <random>
#include <vector>

#include <Poco/Net/HTTPClientSession.h>
#include <Poco/Net/HTTPRequest.h>
#include <Poco/Net/HTTPResponse.h>
#include <Poco/Net/NetException.h>
#include <Poco/Net/WebSocket.h>
#include <Poco/URI.h>

#include "dockhand/base/logging.h"
#include "dockhand/base/thread_name.h"
#include "dockhand/tls/tls.h"

namespace dockhand::agent {

namespace proto = dockhand::protocol;
using Poco::Net::WebSocket;

namespace {

std::shared_ptr<spdlog::logger> log() { return logger("link"); }

// The reader's longest sleep when it has no wake-up descriptor (eventfd failed).
constexpr int kPollIntervalMs = 200;

// Whether `fd` has something to read within `timeout_ms` (-1: no limit), or until `wake_fd`
// (ignored when -1) is written to, which is drained. poll(2): Poco's Socket::poll builds and
// closes an epoll set on every call, three system calls per frame.
bool readable(int fd, int wake_fd, int timeout_ms) {
  pollfd entries[2] = {{fd, POLLIN, 0}, {wake_fd, POLLIN, 0}};
  for (;;) {
    int n = ::poll(entries, 2, timeout_ms);
    if (n >= 0) {
      if (entries[1].revents != 0) {
        std::uint64_t count = 0;
        [[maybe_unused]] auto ignored = ::read(wake_fd, &count, sizeof count);
      }
      return entries[0].revents != 0;
    }
    if (errno != EINTR) throw Poco::IOException(std::string("poll: ") + std::strerror(errno));
  }
}

Poco::Timespan toTimespan(Millis ms) {
  return Poco::Timespan(static_cast<Poco::Timespan::TimeDiff>(ms.count()) * 1000);
}

}  // namespace

WebSocketLink::WebSocketLink(Options options, EventSink& sink, DriverEvents& events)
    : options_(std::move(options)),
      sink_(sink),
      events_(events),
      metrics_(metrics::registryOr(options_.metrics, own_metrics_)),
      wake_fd_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
  // Masking keys need not be secret here (RFC 6455 10.3: they keep a proxy from reading the
  // frames as something else), but they must vary: a generator seeded once per link.
  std::random_device seed;
  mask_state_ = (std::uint64_t{seed()} << 32U) | seed() | 1U;
}

WebSocketLink::~WebSocketLink() {
  closing_ = true;
  if (const int fd = watched_fd_.exchange(-1); fd >= 0) sink_.unwatch(fd);
  wakeReader();
  if (thread_.joinable()) thread_.join();
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

void WebSocketLink::wakeReader() {
  if (wake_fd_ < 0) return;
  const std::uint64_t one = 1;
  [[maybe_unused]] auto ignored = ::write(wake_fd_, &one, sizeof one);
}

int WebSocketLink::readerTimeoutMs() {
  std::lock_guard lock(asks_mutex_);
  if (asks_.empty()) return wake_fd_ >= 0 ? -1 : kPollIntervalMs;
  TimePoint first = asks_.begin()->second.deadline;
  for (const auto& [id, ask] : asks_) first = std::min(first, ask.deadline);
  const auto left = std::chrono::ceil<Millis>(first - SteadyClock::now()).count();
  return static_cast<int>(
      std::clamp<std::int64_t>(left, 0, wake_fd_ >= 0 ? 3600000 : kPollIntervalMs));
}

void WebSocketLink::connect() {
  if (thread_.joinable()) thread_.join();  // a previous attempt has ended (it posted its result)
  closing_ = false;
  thread_ = std::thread([this] {
    nameThisThread("dh-link");
    run();
  });
}

void WebSocketLink::run() {
  std::shared_ptr<WebSocket> ws;
  try {
    Poco::URI uri(options_.url);
    const bool secure = uri.getScheme() == "wss";
    if ((uri.getScheme() != "ws" && !secure) || (secure && !options_.tls)) {
      std::string reason = "unsupported driver URL scheme '" + uri.getScheme() + "' in " +
                           options_.url +
                           (options_.tls ? " (expected wss://host:port/)"
                                         : " (expected ws://host:port/; wss:// needs the tls "
                                           "section)");
      sink_.post([this, reason] { events_.onDriverConnectFailed(reason, false); });
      return;
    }
    std::unique_ptr<Poco::Net::HTTPClientSession> session = tls::newClientSession(
        uri.getHost(), uri.getPort(), secure ? options_.tls : Poco::Net::Context::Ptr());
    session->setTimeout(toTimespan(options_.connect_timeout));
    std::string path = uri.getPathEtc().empty() ? "/" : uri.getPathEtc();
    Poco::Net::HTTPRequest request(Poco::Net::HTTPRequest::HTTP_GET, path,
                                   Poco::Net::HTTPMessage::HTTP_1_1);
    Poco::Net::HTTPResponse response;
    ws = std::make_shared<WebSocket>(*session, request, response);
    ws->setNoDelay(true);
    ws->setSendTimeout(toTimespan(Millis(10000)));
  } catch (const Poco::Exception& e) {
    if (tls::isTlsException(e)) {
      // A certificate that does not verify, a peer that does not speak TLS: the same settings
      // fail the same way on the next try.
      std::string reason = "TLS handshake with the driver failed: " + tls::explainFailure(e);
      log()->error("{}", reason);
      sink_.post([this, reason] { events_.onDriverConnectFailed(reason, false); });
      return;
    }
    std::string reason = e.displayText();
    if (!options_.tls &&
        dynamic_cast<const Poco::Net::ConnectionRefusedException*>(&e) == nullptr &&
        dynamic_cast<const Poco::TimeoutException*>(&e) == nullptr) {
      // A driver that serves wss:// drops a plain request without an answer.
      reason +=
          " (if the driver serves wss://, this agent needs the tls section and a wss:// "
          "driver_url)";
    }
    sink_.post([this, reason] { events_.onDriverConnectFailed(reason, true); });
    return;
  } catch (const std::exception& e) {
    std::string reason = e.what();
    sink_.post([this, reason] { events_.onDriverConnectFailed(reason, true); });
    return;
  }

  reader_.emplace(options_.max_frame_bytes);
  ended_ = false;
  if (auto shaken = handshake(*ws); !shaken) {
    const Error& error = shaken.error();
    if (error.code == proto::error_code::kAuthFailed) {
      metrics_.authFailure();
      sink_.post([this, reason = error.message] { events_.onDriverAuthFailed(reason); });
    } else {
      sink_.post([this, reason = error.message, retryable = error.retryable] {
        events_.onDriverConnectFailed(reason, retryable);
      });
    }
    return;
  }
  {
    std::lock_guard lock(send_mutex_);
    socket_ = ws;
    batch_.clear();  // what was kept for an earlier connection died with it
  }
  connected_.store(true, std::memory_order_release);
  metrics_.connected();
  log()->info("connected to driver {}", options_.url);
  sink_.post([this] { events_.onDriverConnected(); });
  if (options_.read_on_core_thread && !ws->secure()) {
    sink_.post([this, ws] { startCoreReads(ws); });
    waitForAsks();
    return;
  }
  readLoop(*ws);
}

void WebSocketLink::startCoreReads(const std::shared_ptr<WebSocket>& ws) {
  if (closing_ || ended_) return;  // closed or lost before the core thread came to it
  core_socket_ = ws;
  const int fd = ws->impl()->sockfd();
  watched_fd_ = fd;
  if (!sink_.watch(fd, [this] { readOnCore(true); })) {
    watched_fd_ = -1;
    endOnCore("the core thread cannot wait for the driver's socket");
    return;
  }
  readOnCore(false);  // frames that came with the handshake's are buffered, not on the socket
}

void WebSocketLink::readOnCore(bool socket_ready) {
  const std::shared_ptr<WebSocket> ws = core_socket_;
  if (!ws) return;
  std::string reason;
  try {
    if (socket_ready && !reader_->receiveReady(*ws)) {
      endOnCore("connection closed by the driver");
      return;
    }
    // A frame's handler may close the link (and even start the next connection, whose I/O
    // thread makes a new reader): unwatched, the socket is read no further.
    while (!closing_ && watched_fd_.load() >= 0 && reader_->frameReady()) {
      const net::ReceivedFrame frame = reader_->next(*ws, core_payload_);
      if (!handleFrame(*ws, frame, core_payload_, /*on_core=*/true, reason)) {
        endOnCore(reason);
        return;
      }
    }
  } catch (const Poco::Exception& e) {
    endOnCore(e.displayText());
  }
}

void WebSocketLink::endOnCore(const std::string& reason) {
  if (const int fd = watched_fd_.exchange(-1); fd >= 0) sink_.unwatch(fd);
  core_socket_.reset();
  endConnection(reason);
  wakeReader();  // the I/O thread's wait for ask deadlines ends with the connection
}

void WebSocketLink::waitForAsks() {
  while (!closing_ && !ended_) {
    if (!readable(-1, wake_fd_, readerTimeoutMs())) {
      failPendingAsks(proto::error_code::kTimeout, "no reply from the driver in time", true);
    }
  }
  if (closing_) endConnection("the agent closed the connection");
}

void WebSocketLink::readLoop(WebSocket& ws) {
  std::string reason = "connection closed";
  std::vector<char> payload;
  const bool secure = ws.secure();
  try {
    while (!closing_) {
      // A frame may be read ahead already, or, over TLS, decrypted and waiting, with nothing
      // left on the socket.
      bool pending = reader_->buffered() > 0;
      if (!pending && secure) {
        std::lock_guard lock(send_mutex_);
        pending = ws.available() > 0;
      }
      // An idle link sleeps until the driver sends, an ask is due, or the link closes.
      if (!pending && !readable(ws.impl()->sockfd(), wake_fd_, readerTimeoutMs())) {
        failPendingAsks(proto::error_code::kTimeout, "no reply from the driver in time", true);
        continue;
      }
      net::ReceivedFrame frame;
      if (secure) {
        std::lock_guard lock(send_mutex_);
        frame = reader_->next(ws, payload);
      } else {
        frame = reader_->next(ws, payload);
      }
      if (!handleFrame(ws, frame, payload, /*on_core=*/false, reason)) break;
    }
  } catch (const Poco::Exception& e) {
    reason = e.displayText();
  }
  endConnection(reason);
}

bool WebSocketLink::handleFrame(WebSocket& ws, const net::ReceivedFrame& frame,
                                const std::vector<char>& payload, bool on_core,
                                std::string& reason) {
  if (frame.end_of_stream) {
    reason = "connection closed by the driver";
    return false;
  }
  const int op = frame.flags & WebSocket::FRAME_OP_BITMASK;
  if (op == WebSocket::FRAME_OP_CLOSE) {
    reason = "the driver closed the connection";
    return false;
  }
  if (frame.discarded) {
    // Its payload has been read and dropped: the next frame starts where it should, and
    // the tasks running here need not be lost over one bad message.
    ++malformed_frames_;
    metrics_.decodeError();
    const std::string why =
        "a frame of " + std::to_string(frame.length) + " bytes is over this agent's limit of " +
        std::to_string(options_.max_frame_bytes) + " bytes (max_frame_bytes); it was dropped";
    log()->warn("frame from the driver dropped: {}", why);
    sendText(proto::encodeEnvelope(proto::makeError(proto::error_code::kFrameTooLarge, why)));
    return true;
  }
  const int size = static_cast<int>(payload.size());
  if (op == WebSocket::FRAME_OP_PING) {
    std::lock_guard lock(send_mutex_);
    flushLocked();
    ws.sendFrame(payload.data(), size,
                 static_cast<int>(WebSocket::FRAME_FLAG_FIN) | WebSocket::FRAME_OP_PONG);
    return true;
  }
  if (op == WebSocket::FRAME_OP_PONG) return true;
  if (op != WebSocket::FRAME_OP_TEXT || (frame.flags & WebSocket::FRAME_FLAG_FIN) == 0) {
    ++malformed_frames_;
    metrics_.decodeError();
    log()->warn("ignoring a non-text or fragmented frame from the driver (flags {:#x})",
                frame.flags);
    sendText(proto::encodeEnvelope(
        proto::makeError(proto::error_code::kMalformedFrame,
                         "only unfragmented text frames carry protocol messages")));
    return true;
  }
  handleText(std::string_view(payload.data(), payload.size()), on_core);
  return true;
}

void WebSocketLink::endConnection(const std::string& reason) {
  if (ended_.exchange(true)) return;
  connected_.store(false, std::memory_order_release);
  metrics_.disconnected();
  {
    std::lock_guard lock(send_mutex_);
    try {
      if (socket_) socket_->shutdown();
    } catch (const Poco::Exception&) {
      // the peer is gone already
    }
    socket_.reset();
  }
  failPendingAsks(proto::error_code::kDisconnected, "disconnected from the driver: " + reason,
                  false);
  if (!closing_) {
    log()->warn("lost the connection to driver {}: {}", options_.url, reason);
    sink_.post([this, reason] { events_.onDriverDisconnected(reason); });
  }
}

void WebSocketLink::handleText(std::string_view text, bool on_core) {
  auto decoded = proto::decodeEnvelope(text, options_.max_frame_bytes);
  if (!decoded) {
    ++malformed_frames_;
    metrics_.decodeError();
    const auto& err = decoded.error();
    log()->warn("malformed frame from the driver: {}", err.message);
    sendText(proto::encodeEnvelope(err.id != 0
                                       ? proto::makeErrorReply(err.id, err.code, err.message)
                                       : proto::makeError(err.code, err.message)));
    return;
  }
  proto::Envelope env = std::move(decoded.value());
  metrics_.received(env.type);
  if (env.isReply()) {
    AskCallback done;
    {
      std::lock_guard lock(asks_mutex_);
      auto it = asks_.find(env.re);
      if (it != asks_.end()) {
        done = std::move(it->second.done);
        asks_.erase(it);
      }
    }
    if (!done) {
      log()->debug("reply to unknown or expired ask {} ignored", env.re);
      return;
    }
    AskResult result;
    result.ok = env.ok;
    if (env.ok) {
      result.body = std::move(env.body);
    } else {
      result.error = *env.error;
    }
    postAskResult(std::move(done), std::move(result));
    return;
  }
  if (on_core) {
    events_.onDriverFrame(env);
  } else {
    sink_.post([this, env = std::move(env)] { events_.onDriverFrame(env); });
  }
}

std::uint32_t WebSocketLink::nextMask() {
  mask_state_ ^= mask_state_ << 13U;
  mask_state_ ^= mask_state_ >> 7U;
  mask_state_ ^= mask_state_ << 17U;
  return static_cast<std::uint32_t>(mask_state_ >> 32U);
}

bool WebSocketLink::flushLocked() {
  if (batch_.empty()) return true;
  if (!socket_) {
    batch_.clear();
    return false;
  }
  try {
    net::sendAll(socket_->impl()->sockfd(), batch_);
    batch_.clear();
    return true;
  } catch (const Poco::Exception& e) {
    log()->warn("send to driver failed: {}", e.displayText());
    batch_.clear();
    return false;
  }
}

void WebSocketLink::flush() {
  std::lock_guard lock(send_mutex_);
  flushLocked();
}

bool WebSocketLink::sendText(const std::string& text) {
  std::lock_guard lock(send_mutex_);
  if (!socket_) return false;
  try {
    if (std::this_thread::get_id() == batching_thread_ && !socket_->secure()) {
      net::appendClientFrame(batch_, WebSocket::FRAME_TEXT, text, nextMask());
      return batch_.size() < kMaxBatchBytes || flushLocked();
    }
    if (!flushLocked()) return false;
    socket_->sendFrame(text.data(), static_cast<int>(text.size()), WebSocket::FRAME_TEXT);
    return true;
  } catch (const Poco::Exception& e) {
    log()->warn("send to driver failed: {}", e.displayText());
    return false;
  }
}

bool WebSocketLink::send(const proto::Envelope& message) {
  return connected() && sendEncoded(message.type, proto::encodeEnvelope(message));
}

bool WebSocketLink::sendEncoded(std::string_view type, const std::string& text) {
  if (!connected() || !sendText(text)) return false;
  metrics_.sent(type);
  return true;
}

void WebSocketLink::ask(proto::Envelope message, Millis timeout, AskCallback done) {
  std::uint64_t id = next_id_++;
  message.id = id;
  {
    std::lock_guard lock(asks_mutex_);
    asks_.emplace(id, PendingAsk{std::move(done), SteadyClock::now() + timeout});
  }
  wakeReader();  // its sleep may end after this ask's deadline
  const bool sent = connected() && sendText(proto::encodeEnvelope(message));
  if (sent) metrics_.sent(message.type);
  if (!sent) {
    AskCallback callback;
    {
      std::lock_guard lock(asks_mutex_);
      auto it = asks_.find(id);
      if (it == asks_.end()) return;  // already failed by the reader
      callback = std::move(it->second.done);
      asks_.erase(it);
    }
    AskResult result;
    result.error = {std::string(proto::error_code::kDisconnected), "not connected to the driver"};
    postAskResult(std::move(callback), std::move(result));
  }
}

void WebSocketLink::postAskResult(AskCallback done, AskResult result) {
  sink_.post(
      [done = std::move(done), result = std::move(result)]() mutable { done(std::move(result)); });
}

void WebSocketLink::failPendingAsks(std::string_view code, const std::string& message,
                                    bool only_expired) {
  std::vector<AskCallback> failed;
  {
    std::lock_guard lock(asks_mutex_);
    TimePoint now = SteadyClock::now();
    for (auto it = asks_.begin(); it != asks_.end();) {
      if (!only_expired || it->second.deadline <= now) {
        failed.push_back(std::move(it->second.done));
        it = asks_.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (auto& done : failed) {
    AskResult result;
    result.error = {std::string(code), message};
    postAskResult(std::move(done), std::move(result));
  }
}

void WebSocketLink::close() {
  closing_ = true;
  if (const int fd = watched_fd_.exchange(-1); fd >= 0) sink_.unwatch(fd);
  wakeReader();
  connected_.store(false, std::memory_order_release);
  {
    std::lock_guard lock(send_mutex_);
    flushLocked();
    if (socket_) {
      try {
        socket_->shutdown(WebSocket::WS_NORMAL_CLOSE, "agent exiting");
        // Wake the reader now rather than at its next poll timeout: the agent is leaving and
        // has nothing more to read.
        ::shutdown(socket_->impl()->sockfd(), SHUT_RD);
      } catch (const Poco::Exception&) {
        // nothing to tell a peer that is gone
      }
    }
  }
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
}

}  // namespace dockhand::agent
