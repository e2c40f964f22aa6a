// Connection: one agent connection's outbound queue and close, as AgentServer's transports use
// it: the reactor takes a plain connection's queue (ConnectionReactor::flush); a TLS
// connection's writer thread takes its own (writerLoop), its reader the frames it sent itself
// (sendHeld). See agent_server.h.
#include <sys/socket.h>

#include <chrono>
#include <string>
#include <thread>

#include <Poco/Net/NetException.h>
#include <Poco/Net/WebSocket.h>
#include <fmt/format.h>

#include "dockhand/base/logging.h"
#include "dockhand/base/thread_name.h"
#include "dockhand/driver/agent_server.h"
#include "dockhand/net/websocket_frames.h"

#include "connection_reactor.h"

namespace dockhand::driver {

using Poco::Net::WebSocket;

namespace {

// Ends a blocked receive on the socket at once (both directions).
void hardShutdown(WebSocket* socket) {
  if (socket != nullptr) ::shutdown(socket->impl()->sockfd(), SHUT_RDWR);
}

}  // namespace

// ---- Connection -----------------------------------------------------------------------------

Connection::Connection(std::uint64_t id, std::string peer, std::size_t max_queued)
    : id_(id), peer_(std::move(peer)), max_queued_(max_queued) {}

Connection::~Connection() { stopWriter(); }

void Connection::attach(WebSocket* socket) {
  socket_ = socket;
  secure_ = socket->secure();
  reader_ = std::this_thread::get_id();
  writer_ = std::thread([this] {
    nameThisThread("dhd-writer");
    writerLoop();
  });
}

bool Connection::send(Outbound frame) {
  bool accepted = false;
  bool wake = false;
  {
    std::lock_guard lock(mutex_);
    if (closing_.load()) return false;
    if (queue_.size() >= max_queued_) {
      close_reason_ =
          fmt::format("more than {} frames queued: the agent stopped reading", max_queued_);
      closing_.store(true);
      overflowed_ = true;
      logger("driver")->warn("connection {} ({}): {}; dropping it", id_, peer_, close_reason_);
      wake = true;
    } else {
      queue_.push_back(std::move(frame));
      accepted = true;
      if (reactor_ != nullptr) {
        wake = !wake_pending_;  // once per batch: the reactor takes the whole queue
        wake_pending_ = true;
      } else if (!secure_ && std::this_thread::get_id() == reader_) {
        held_ = true;  // the reader writes it before it waits for the next frame (sendHeld)
        return true;
      } else {
        wake = true;
      }
    }
  }
  if (wake) {
    if (reactor_ != nullptr) {
      reactor_->wake(id_);
    } else {
      cv_.notify_one();
    }
  }
  return accepted;
}

void Connection::close(const std::string& reason) {
  {
    std::lock_guard lock(mutex_);
    if (closing_.load()) return;
    close_reason_ = reason;
    closing_.store(true);
  }
  if (reactor_ != nullptr) {
    reactor_->wake(id_);
  } else {
    cv_.notify_one();
  }
}

int Connection::encode(Outbound& item, std::string& text) {
  if (auto* s = std::get_if<std::string>(&item)) {
    text = std::move(*s);
  } else if (auto* e = std::get_if<protocol::Envelope>(&item)) {
    text = protocol::encodeEnvelope(*e);
  } else if (auto* l = std::get_if<protocol::LaunchTask>(&item)) {
    text = protocol::encodeEnvelope(protocol::makeMessage(*l));
  } else {
    auto& c = std::get<Control>(item);
    text = std::move(c.payload);
    return c.flags;
  }
  return WebSocket::FRAME_TEXT;
}

void Connection::stopWriter() {
  {
    std::lock_guard lock(mutex_);
    stop_writer_ = true;
  }
  cv_.notify_one();
  if (writer_.joinable()) writer_.join();
}

// The most buffer a connection keeps between batches.
constexpr std::size_t kKeptWireBytes = std::size_t{1} << 20;

void Connection::takeQueued(std::deque<Outbound>& batch, std::string& text) {
  {
    std::lock_guard lock(mutex_);
    batch.swap(queue_);
  }
  // A plain connection gets the whole batch in one write: under load the scheduler queues
  // several frames (launches, replies) while one write is under way.
  for (auto& item : batch) {
    const int flags = encode(item, text);
    if (!secure_) {
      net::appendServerFrame(unsent_, flags, text);
      continue;
    }
    std::lock_guard io(io_mutex_);
    socket_->sendFrame(text.data(), static_cast<int>(text.size()), flags);
  }
  batch.clear();
}

void Connection::sendHeld() {
  {
    std::lock_guard lock(mutex_);
    if (!held_) return;
    held_ = false;
  }
  // The writer is writing: it takes these next, as it loops while frames are queued.
  std::unique_lock write(write_mutex_, std::try_to_lock);
  if (!write.owns_lock()) return;
  // Plain frames only (held_ is never set over TLS): encoding them does not throw.
  takeQueued(held_batch_, held_text_);
  const std::size_t written = net::sendWhatFits(socket_->impl()->sockfd(), unsent_);
  unsent_.erase(0, written);
  if (unsent_.empty()) {
    if (unsent_.capacity() > kKeptWireBytes) std::string().swap(unsent_);  // after a burst
    return;
  }
  // The agent reads slower than this: the writer waits for the socket instead of the reader.
  write.unlock();
  {
    std::lock_guard lock(mutex_);
    leftover_ = true;
  }
  cv_.notify_one();
}

void Connection::writerLoop() {
  std::deque<Outbound> batch;
  std::string text;
  for (;;) {
    bool closing = false;
    {
      std::unique_lock lock(mutex_);
      cv_.wait(lock,
               [&] { return !queue_.empty() || leftover_ || stop_writer_ || closing_.load(); });
      // The reader is done: nothing to say.
      if (stop_writer_ && queue_.empty() && !leftover_) return;
      leftover_ = false;
      held_ = false;  // whatever the reader queued goes now, in order
      closing = closing_.load();
    }
    try {
      std::lock_guard write(write_mutex_);
      takeQueued(batch, text);
      if (!unsent_.empty()) net::sendAll(socket_->impl()->sockfd(), unsent_);
      unsent_.clear();
      if (unsent_.capacity() > kKeptWireBytes) std::string().swap(unsent_);  // after a burst
    } catch (const Poco::Exception& e) {
      logger("driver")->warn("connection {} ({}): send failed: {}", id_, peer_, e.displayText());
      hardShutdown(socket_);
      std::unique_lock lock(mutex_);
      closing_.store(true);
      queue_.clear();
      cv_.wait(lock, [&] { return stop_writer_; });
      return;
    }
    if (!closing) continue;
    {
      std::lock_guard lock(mutex_);
      if (!queue_.empty() || leftover_) continue;  // frames queued before close() still go out
    }
    // Everything is sent: say goodbye, stop sending, and give the peer a moment to answer
    // the close before the reader is cut off.
    try {
      std::string reason;
      {
        std::lock_guard lock(mutex_);
        reason = close_reason_.substr(0, 120);
      }
      {
        std::lock_guard write(write_mutex_);
        std::unique_lock io(io_mutex_, std::defer_lock);
        if (secure_) io.lock();
        socket_->shutdown(WebSocket::WS_NORMAL_CLOSE, reason);
      }
      ::shutdown(socket_->impl()->sockfd(), SHUT_WR);
    } catch (const Poco::Exception&) {
      // The peer is gone already; the reader will notice.
    }
    std::unique_lock lock(mutex_);
    if (!cv_.wait_for(lock, std::chrono::seconds(2), [&] { return stop_writer_; })) {
      hardShutdown(socket_);
      cv_.wait(lock, [&] { return stop_writer_; });
    }
    return;
  }
}

}  // namespace dockhand::driver
