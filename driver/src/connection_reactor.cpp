#include "connection_reactor.h"

#include "connection_reactor_slot.h"

#include <pthread.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <system_error>

#include <fmt/format.h>

#include "dockhand/base/logging.h"
#include "dockhand/base/thread_name.h"
#include "dockhand/net/websocket_frames.h"

namespace dockhand::driver {

using Poco::Net::WebSocket;

namespace {

constexpr std::uint64_t kWakeTag = 0;  // connection ids start at 1
constexpr std::size_t kReadPiece = std::size_t{64} * 1024;
constexpr int kFinClose = int{WebSocket::FRAME_FLAG_FIN} | int{WebSocket::FRAME_OP_CLOSE};

std::string errnoText(int error) {
  return std::error_code(error, std::generic_category()).message();
}

}  // namespace

ConnectionReactor::ConnectionReactor(const ServerOptions& options, FrameHandler& handler, Gone gone)
    : options_(options), handler_(handler), gone_(std::move(gone)) {}

ConnectionReactor::~ConnectionReactor() {
  stop();
  if (epoll_ >= 0) ::close(epoll_);
  if (wakeup_ >= 0) ::close(wakeup_);
}

void ConnectionReactor::start() {
  epoll_ = ::epoll_create1(EPOLL_CLOEXEC);
  if (epoll_ < 0) throw std::system_error(errno, std::generic_category(), "epoll_create1");
  wakeup_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wakeup_ < 0) throw std::system_error(errno, std::generic_category(), "eventfd");
  epoll_event event{};
  event.events = EPOLLIN;
  event.data.u64 = kWakeTag;
  if (::epoll_ctl(epoll_, EPOLL_CTL_ADD, wakeup_, &event) != 0) {
    throw std::system_error(errno, std::generic_category(), "epoll_ctl");
  }
  thread_ = std::thread([this] {
    nameThisThread("dhd-reactor");
    // A wss:// write to a peer that has gone raises SIGPIPE (OpenSSL writes with write(2); the
    // plain writes say MSG_NOSIGNAL): blocked here, it only fails the write, in any process.
    sigset_t pipe;
    sigemptyset(&pipe);
    sigaddset(&pipe, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe, nullptr);
    loop();
  });
  thread_id_ = thread_.get_id();
}

void ConnectionReactor::stop() {
  {
    std::lock_guard lock(mutex_);
    if (stopping_) return;
    stopping_ = true;
    signalLocked();
  }
  if (thread_.joinable()) thread_.join();
}

void ConnectionReactor::adopt(std::shared_ptr<Connection> connection, const WebSocket& socket,
                              tls::NonBlockingStream* tls) {
  std::lock_guard lock(mutex_);
  adopted_.push_back(Adopted{std::move(connection), socket, tls});
  signalLocked();
}

void ConnectionReactor::signalLocked() {
  if (signalled_) return;  // one wake-up not taken yet is enough
  signalled_ = true;
  const std::uint64_t one = 1;
  [[maybe_unused]] auto n = ::write(wakeup_, &one, sizeof one);
}

void ConnectionReactor::wake(std::uint64_t id) {
  if (std::this_thread::get_id() == thread_id_) {
    dirty_.push_back(id);
    return;
  }
  std::lock_guard lock(mutex_);
  woken_.push_back(id);
  signalLocked();
}

// ---- the loop ---------------------------------------------------------------------------------

void ConnectionReactor::loop() {
  std::array<epoll_event, 256> events{};
  std::vector<std::uint64_t> dirty;
  std::vector<std::uint64_t> backlog;
  for (;;) {
    const int n =
        ::epoll_wait(epoll_, events.data(), static_cast<int>(events.size()), waitMs(Clock::now()));
    if (n < 0 && errno != EINTR) {
      logger("driver")->error("the connection reactor stops: epoll_wait: {}", errnoText(errno));
      break;
    }
    bool stop = false;
    for (int i = 0; i < n; ++i) {
      const epoll_event& event = events[static_cast<std::size_t>(i)];
      if (event.data.u64 == kWakeTag) {
        std::uint64_t count = 0;
        [[maybe_unused]] auto got = ::read(wakeup_, &count, sizeof count);
        {
          std::lock_guard lock(mutex_);
          signalled_ = false;
          stop = stopping_;
        }
        takeAdopted();
        takeWoken();
        continue;
      }
      auto it = slots_.find(event.data.u64);
      if (it == slots_.end() || it->second->ended) continue;
      Slot& s = *it->second;
      const bool in = (event.events & (EPOLLIN | EPOLLHUP | EPOLLERR | EPOLLRDHUP)) != 0;
      const bool out = (event.events & EPOLLOUT) != 0;
      // A TLS read may wait for writability, a TLS write for readability.
      if (in || (out && s.read_wants_out)) readable(s);
      if (!s.ended && (out || (in && s.write_wants_in))) flush(s);
    }
    // What the handler sent while it handled these frames goes out now, in one write each.
    flushDirty(dirty);
    // The connections that had more than one turn's worth get their next turn.
    if (!backlog_.empty()) {
      backlog.swap(backlog_);
      for (std::uint64_t id : backlog) {
        auto it = slots_.find(id);
        if (it == slots_.end() || it->second->ended) continue;
        Slot& s = *it->second;
        s.in_backlog = false;
        if (s.read_more) {
          readable(s);  // bytes the TLS layer holds (readable takes the frames too)
        } else {
          takeFrames(s);
        }
        if (!s.ended) flush(s);
      }
      backlog.clear();
      flushDirty(dirty);
    }
    fireTimers(Clock::now());
    for (std::uint64_t id : ended_) slots_.erase(id);
    ended_.clear();
    if (stop) break;
  }
  // Shutting down: whatever is still open ends now.
  for (auto& [id, slot] : slots_) {
    if (!slot->ended) end(*slot, "the driver is shutting down");
  }
  slots_.clear();
  std::vector<Adopted> late;
  {
    std::lock_guard lock(mutex_);
    late.swap(adopted_);
  }
  for (auto& adopted : late) {
    adopted.socket.close();
    gone_(adopted.connection);
  }
}

void ConnectionReactor::flushDirty(std::vector<std::uint64_t>& spare) {
  while (!dirty_.empty()) {
    spare.swap(dirty_);
    for (std::uint64_t id : spare) {
      auto it = slots_.find(id);
      if (it != slots_.end() && !it->second->ended) flush(*it->second);
    }
    spare.clear();
  }
}

void ConnectionReactor::later(Slot& s) {
  if (s.in_backlog) return;
  s.in_backlog = true;
  backlog_.push_back(s.connection->id());
}

void ConnectionReactor::takeAdopted() {
  std::vector<Adopted> adopted;
  {
    std::lock_guard lock(mutex_);
    adopted.swap(adopted_);
  }
  for (auto& one : adopted) open(std::move(one));
}

void ConnectionReactor::takeWoken() {
  std::vector<std::uint64_t> woken;
  {
    std::lock_guard lock(mutex_);
    woken.swap(woken_);
  }
  for (std::uint64_t id : woken) {
    auto it = slots_.find(id);
    if (it != slots_.end() && !it->second->ended) flush(*it->second);
  }
}

void ConnectionReactor::open(Adopted adopted) {
  const std::uint64_t id = adopted.connection->id();
  auto slot = std::make_unique<Slot>(std::move(adopted));
  Slot& s = *slot;
  slots_.emplace(id, std::move(slot));
  s.last_read = Clock::now();
  bool open = true;
  try {
    std::string ahead;
    open = net::takeReadAhead(s.socket, ahead);
    s.in.assign(ahead.begin(), ahead.end());
    s.in_end = s.in.size();
  } catch (const Poco::Exception& e) {
    logger("driver")->warn("connection {} ({}): {}", id, s.connection->peer(), e.displayText());
    open = false;
  }
  epoll_event event{};
  event.events = EPOLLIN | EPOLLRDHUP;
  event.data.u64 = id;
  if (::epoll_ctl(epoll_, EPOLL_CTL_ADD, s.fd, &event) != 0) {
    const std::string why = "epoll_ctl: " + errnoText(errno);
    logger("driver")->error("connection {} ({}): {}", id, s.connection->peer(), why);
    end(s, why);
    return;
  }
  try {
    handler_.onOpen(s.connection);
  } catch (const std::exception& e) {
    const std::string why = fmt::format("internal error: {}", e.what());
    logger("driver")->error("connection {} ({}): {}", id, s.connection->peer(), why);
    end(s, why);
    return;
  }
  arm(s, s.last_read + std::chrono::milliseconds(options_.hello_timeout_ms));
  takeFrames(s);
  if (!open && !s.ended) finish(s, "the agent closed the connection");
}

// ---- reading ----------------------------------------------------------------------------------

void ConnectionReactor::readable(Slot& s) {
  s.read_more = false;
  s.read_wants_out = false;
  makeRoom(s);
  // One read of the socket (plain), or TLS records until OpenSSL wants the socket or the room
  // is full (each read returns one record's bytes at most).
  bool got_any = false;
  for (;;) {
    const Io io = receive(s, s.in.data() + s.in_end, s.in.size() - s.in_end);
    if (io.status == Status::kDone) {
      s.in_end += io.bytes;
      got_any = true;
      if (s.tls != nullptr && s.in_end < s.in.size()) continue;
      s.read_more = s.tls != nullptr && s.tls->pending();
      break;
    }
    if (io.status == Status::kWantRead) break;
    if (io.status == Status::kWantWrite) {
      s.read_wants_out = true;
      watch(s, true);
      break;
    }
    finish(s, io.status == Status::kClosed
                  ? (s.phase == Slot::Phase::kOpen ? "the agent closed the connection" : s.why)
                  : "connection error: " + io.error);
    return;
  }
  if (s.write_wants_in) flush(s);
  if (!got_any || s.ended) return;
  s.last_read = Clock::now();
  if (s.discard_input) {
    s.in_begin = s.in_end = 0;
  } else {
    takeFrames(s);
  }
  if (s.read_more && !s.ended) later(s);
}

// Room for a whole piece of reading: the unread part moves to the front; the buffer grows only
// for a frame longer than it.
void ConnectionReactor::makeRoom(Slot& s) {
  if (s.in.size() - s.in_end >= kReadPiece) return;
  if (s.in_begin > 0) {
    std::memmove(s.in.data(), s.in.data() + s.in_begin, s.in_end - s.in_begin);
    s.in_end -= s.in_begin;
    s.in_begin = 0;
  }
  if (s.in.size() - s.in_end < kReadPiece) s.in.resize(s.in_end + kReadPiece);
}

// The connection ends for `why` (the peer went, or a read or a write failed), but first every
// whole frame the peer sent before is handled, with what the socket still holds: an agent's
// last words (ExecutorDecommissioned, then its exit) are never lost because the driver's
// answer to an earlier frame met the closed socket, or because more than a turn's worth of
// frames waited.
void ConnectionReactor::finish(Slot& s, const std::string& why) {
  if (s.ended) return;
  if (!s.discard_input) {
    for (std::size_t read = 0; read < reactor::kMaxUnsent;) {
      makeRoom(s);
      const Io io = receive(s, s.in.data() + s.in_end, s.in.size() - s.in_end);
      if (io.status != Status::kDone || io.bytes == 0) break;
      s.in_end += io.bytes;
      read += io.bytes;
    }
    for (std::size_t left = s.in_end - s.in_begin; !s.ended && left > 0;) {
      takeFrames(s);
      const std::size_t now = s.in_end - s.in_begin;
      if (now == left) break;  // a partial frame at most
      left = now;
    }
  }
  end(s, why);
}

// One read: a plain socket's recv, or a TLS read.
ConnectionReactor::Io ConnectionReactor::receive(Slot& s, char* data, std::size_t size) {
  if (s.tls != nullptr) return s.tls->read(data, size);
  ssize_t got = 0;
  do {
    got = ::recv(s.fd, data, size, 0);
  } while (got < 0 && errno == EINTR);
  if (got > 0) return Io{Status::kDone, static_cast<std::size_t>(got), {}};
  if (got == 0) return Io{Status::kClosed, 0, {}};
  if (errno == EAGAIN || errno == EWOULDBLOCK) return Io{Status::kWantRead, 0, {}};
  return Io{Status::kFailed, 0, errnoText(errno)};
}

// One write: a plain socket's send, or a TLS write.
ConnectionReactor::Io ConnectionReactor::transmit(Slot& s, const char* data, std::size_t size) {
  if (s.tls != nullptr) return s.tls->write(data, size);
  ssize_t n = 0;
  do {
    n = ::send(s.fd, data, size, MSG_NOSIGNAL | MSG_DONTWAIT);
  } while (n < 0 && errno == EINTR);
  if (n >= 0) return Io{Status::kDone, static_cast<std::size_t>(n), {}};
  if (errno == EAGAIN || errno == EWOULDBLOCK) return Io{Status::kWantWrite, 0, {}};
  return Io{Status::kFailed, 0, errnoText(errno)};
}

// ---- writing ----------------------------------------------------------------------------------

void ConnectionReactor::flush(Slot& s) {
  Connection& c = *s.connection;
  bool closing = false;
  bool overflowed = false;
  std::string reason;
  if (s.out_begin == s.out.size()) s.last_written = Clock::now();  // a stall counts from here
  bool left = false;  // frames stay queued for the next turn
  {
    std::lock_guard lock(c.mutex_);
    c.wake_pending_ = false;
    overflowed = c.overflowed_;
    if (overflowed) {
      reason = c.close_reason_;  // the agent stopped reading: nothing more is written to it
    } else {
      if (s.out.size() - s.out_begin < reactor::kMaxUnsent) {
        for (int n = 0; n < reactor::kFramesPerTurn && !c.queue_.empty(); ++n) {
          s.batch.push_back(std::move(c.queue_.front()));
          c.queue_.pop_front();
        }
      }
      left = !c.queue_.empty();
      closing = c.closing_.load() && !left;
      if (closing) reason = c.close_reason_.substr(0, 120);
    }
  }
  encodeBatch(s);
  if (overflowed) {
    handler_.onDropped(s.connection, DropReason::kStoppedReading);
    end(s, reason);
    return;
  }
  if (closing && s.phase == Slot::Phase::kOpen) {
    if (s.why.empty()) s.why = "closed by the driver";
    std::string body;
    body += static_cast<char>(WebSocket::WS_NORMAL_CLOSE >> 8);
    body += static_cast<char>(WebSocket::WS_NORMAL_CLOSE & 0xff);
    body += reason;
    net::appendServerFrame(s.out, kFinClose, body);
    s.phase = Slot::Phase::kClosing;
  }
  if (!writeOut(s)) return;
  if (s.out_begin < s.out.size()) {
    watch(s, true);
    return;
  }
  s.out.clear();
  s.out_begin = 0;
  if (s.out.capacity() > reactor::kMaxUnsent) std::string().swap(s.out);  // after a burst
  watch(s, false);
  if (left) later(s);  // the socket took it all: the rest of the queue next turn
  if (s.phase == Slot::Phase::kClosing) {
    if (s.tls != nullptr) s.tls->closeNotify();
    ::shutdown(s.fd, SHUT_WR);
    s.phase = Slot::Phase::kDraining;
    s.drain_until = Clock::now() + kCloseWait;
    arm(s, s.drain_until);
  }
}

// Encodes the frames taken from the connection's queue onto what is to be written.
void ConnectionReactor::encodeBatch(Slot& s) {
  for (auto& item : s.batch) {
    const int flags = Connection::encode(item, s.text);
    net::appendServerFrame(s.out, flags, s.text);
  }
  s.batch.clear();
}

// Writes what the socket takes now; false when the connection ended on an error.
bool ConnectionReactor::writeOut(Slot& s) {
  s.write_wants_in = false;
  const std::size_t before = s.out_begin;
  while (s.out_begin < s.out.size()) {
    const Io io = transmit(s, s.out.data() + s.out_begin, s.out.size() - s.out_begin);
    if (io.status == Status::kDone && io.bytes > 0) {
      s.out_begin += io.bytes;
      continue;
    }
    if (io.status == Status::kWantWrite || io.status == Status::kDone) break;
    if (io.status == Status::kWantRead) {
      s.write_wants_in = true;  // readable() calls flush again
      break;
    }
    const std::string why = io.status == Status::kClosed
                                ? "send failed: the agent closed the connection"
                                : "send failed: " + io.error;
    logger("driver")->warn("connection {} ({}): {}", s.connection->id(), s.connection->peer(), why);
    s.out.clear();  // nothing more can be written: what the peer sent is still handled
    s.out_begin = 0;
    s.phase = Slot::Phase::kDraining;
    finish(s, why);
    return false;
  }
  if (s.out_begin != before || s.out_begin == s.out.size()) s.last_written = Clock::now();
  return true;
}

void ConnectionReactor::watch(Slot& s, bool want_out) {
  want_out = want_out || s.read_wants_out;
  if (s.watching_out == want_out) return;
  epoll_event event{};
  event.events = EPOLLIN | EPOLLRDHUP | (want_out ? EPOLLOUT : 0U);
  event.data.u64 = s.connection->id();
  if (::epoll_ctl(epoll_, EPOLL_CTL_MOD, s.fd, &event) == 0) s.watching_out = want_out;
  if (want_out) arm(s, s.last_written + kWriteStallLimit);
}

// ---- ending -----------------------------------------------------------------------------------

void ConnectionReactor::end(Slot& s, const std::string& why) {
  if (s.ended) return;
  s.ended = true;
  Connection& c = *s.connection;
  try {
    handler_.onClose(s.connection, why);
  } catch (const std::exception& e) {
    logger("driver")->error("connection {} ({}): close handler failed: {}", c.id(), c.peer(),
                            e.what());
  }
  c.close(why);
  // A last word where the socket still takes one (the peer may be gone already).
  if (s.phase == Slot::Phase::kOpen && s.out_begin == s.out.size()) {
    {
      std::lock_guard lock(c.mutex_);
      s.batch.swap(c.queue_);
    }
    encodeBatch(s);
    if (s.out_begin < s.out.size()) {
      transmit(s, s.out.data() + s.out_begin, s.out.size() - s.out_begin);
    }
  }
  ::epoll_ctl(epoll_, EPOLL_CTL_DEL, s.fd, nullptr);
  try {
    s.socket.close();
  } catch (const Poco::Exception&) {
    // Closed already.
  }
  ended_.push_back(c.id());
  gone_(s.connection);
}

}  // namespace dockhand::driver
