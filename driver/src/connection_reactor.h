// ConnectionReactor: one thread that serves every agent connection of the driver, ws:// and
// wss://, with epoll, so that the driver holds no thread per agent. The HTTP upgrade (and the
// TLS handshake before it) is still done on a pool thread (AgentServer); the upgraded socket is
// then adopted here and the pool thread returns. A wss:// connection's bytes go through its
// tls::NonBlockingStream: a read or a write that OpenSSL cannot finish until the socket is
// readable (or writable) waits for that readiness in the same epoll, and decrypted bytes left in
// the TLS layer are read on the next turn, since the socket does not announce them.
//
// On this one thread, for each connection: non-blocking reads of what the socket has (up to
// 64 KiB at a time per readiness, so that a busy agent does not starve the others),
// frames taken out of that buffer (net::parseFrameHeader, the one reading of a header; at
// most 64 of one connection per turn of the loop, the rest on the next turn, so that an agent
// with a burst does not hold up the others), the
// handler's onOpen, onFrame... and onClose in that order; the connection's queued frames
// encoded into one buffer and written as far as the socket takes them, the rest when epoll
// says it may (EPOLLOUT). A sender on another thread queues a frame and, once per batch, wakes
// this thread through an eventfd; a frame the handler sends while it handles a frame is
// written once the frames read with it are handled, with no wake-up at all.
//
// Bounds: a connection whose queue passes max_queued_frames is dropped (Connection::send); one
// whose written bytes have not moved for kWriteStallLimit is dropped with that reason; one
// that sends no Hello within hello_timeout_ms gets an Error and is closed; a greeted one that
// is silent for idle_timeout_ms is asked about (FrameHandler::onIdle). Timers are a queue of
// deadlines, one per connection, re-armed lazily: the thread sleeps until the earliest one, or
// for ever when there is none.
//
// A closing connection sends what was queued, a close frame, shuts its side down and reads
// until the peer closes (at most kCloseWait) so that the peer reads every frame before the
// socket goes (over TLS, a close_notify comes before the shutdown).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <queue>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include <Poco/Net/WebSocket.h>

#include "dockhand/driver/agent_server.h"
#include "dockhand/tls/tls.h"

namespace dockhand::driver {

class ConnectionReactor {
 public:
  using Clock = std::chrono::steady_clock;
  // Called on the reactor's thread once a connection has ended (after onClose).
  using Gone = std::function<void(const std::shared_ptr<Connection>&)>;

  // A peer that reads nothing of what is written to it for this long is dropped.
  static constexpr std::chrono::seconds kWriteStallLimit{30};
  // How long a closing connection waits for the peer to close its side.
  static constexpr std::chrono::seconds kCloseWait{2};

  ConnectionReactor(const ServerOptions& options, FrameHandler& handler, Gone gone);
  ~ConnectionReactor();
  ConnectionReactor(const ConnectionReactor&) = delete;
  ConnectionReactor& operator=(const ConnectionReactor&) = delete;

  // Starts the thread. Throws std::system_error when epoll or eventfd cannot be made.
  void start();
  // Takes an upgraded WebSocket, its connection attached to this reactor already
  // (Connection::attach); the connection is served from now on. `tls`: the connection's TLS
  // (wss://), which lives as long as the socket; null for ws://. Any thread.
  void adopt(std::shared_ptr<Connection> connection, const Poco::Net::WebSocket& socket,
             tls::NonBlockingStream* tls);
  // Ends what is still open (onClose for each, "the driver is shutting down") and the thread.
  void stop();

  // Connection::send/close: `id` has frames queued or is to close. Any thread.
  void wake(std::uint64_t id);

 private:
  struct Slot;
  struct Adopted {
    std::shared_ptr<Connection> connection;
    Poco::Net::WebSocket socket;
    tls::NonBlockingStream* tls = nullptr;
  };
  using Timer = std::pair<Clock::time_point, std::uint64_t>;

  void loop();
  void takeAdopted();
  void takeWoken();
  void flushDirty(std::vector<std::uint64_t>& spare);
  void later(Slot& s);
  void open(Adopted adopted);
  void readable(Slot& s);
  static void makeRoom(Slot& s);
  void finish(Slot& s, const std::string& why);
  void takeFrames(Slot& s);
  void handleFrame(Slot& s, int flags, std::string_view payload);
  void deliver(Slot& s, std::string_view message);
  void flush(Slot& s);
  void encodeBatch(Slot& s);
  void signalLocked();  // wakes the loop through the eventfd; under mutex_
  bool writeOut(Slot& s);
  using Status = tls::NonBlockingStream::Status;
  using Io = tls::NonBlockingStream::Io;
  static Io receive(Slot& s, char* data, std::size_t size);
  static Io transmit(Slot& s, const char* data, std::size_t size);
  void refuse(Slot& s, const std::string& error_code, std::string why);
  void closeAfterRead(Slot& s, std::string why);
  void end(Slot& s, const std::string& why);
  void arm(Slot& s, Clock::time_point at);
  void fireTimers(Clock::time_point now);
  void onDeadline(Slot& s, Clock::time_point now);
  int waitMs(Clock::time_point now) const;
  void watch(Slot& s, bool want_out);

  const ServerOptions& options_;
  FrameHandler& handler_;
  Gone gone_;
  int epoll_ = -1;
  int wakeup_ = -1;  // an eventfd
  std::thread thread_;
  std::thread::id thread_id_;

  std::mutex mutex_;  // guards the three below
  std::vector<Adopted> adopted_;
  std::vector<std::uint64_t> woken_;
  bool stopping_ = false;
  bool signalled_ = false;  // the eventfd holds a wake-up not taken yet

  // The reactor thread's own.
  std::unordered_map<std::uint64_t, std::unique_ptr<Slot>> slots_;
  std::vector<std::uint64_t> dirty_;    // connections its own sends queued frames on
  std::vector<std::uint64_t> backlog_;  // connections with frames left for the next turn
  std::priority_queue<Timer, std::vector<Timer>, std::greater<>> timers_;
  std::vector<std::uint64_t> ended_;  // slots to free after the current batch
};

}  // namespace dockhand::driver
