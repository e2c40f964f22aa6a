// ConnectionReactor::Slot: what the reactor keeps for one connection, and the reactor's bounds,
// shared by its source files (connection_reactor.cpp: the loop, reading, writing, ending;
// connection_reactor_frames.cpp: the frames; connection_reactor_timers.cpp: its deadlines).
// Private to the driver.
#pragma once

#include <deque>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <Poco/Net/WebSocket.h>

#include "connection_reactor.h"

namespace dockhand::driver {

namespace reactor {

// The most encoded bytes a connection holds unwritten before its queue is left to grow (and
// meet max_queued_frames); also the most buffer it keeps between bursts.
inline constexpr std::size_t kMaxUnsent = std::size_t{1} << 20;
// The most frames of one connection handled, or taken from its queue at once, per turn of the
// loop: a connection with a burst waits for the next turn, so that the others are served.
inline constexpr int kFramesPerTurn = 64;

}  // namespace reactor

// What the reactor keeps for one connection; touched by the reactor's thread only.
struct ConnectionReactor::Slot {
  enum class Phase {
    kOpen,      // frames go both ways
    kClosing,   // a close frame is queued behind the last frames
    kDraining,  // our side is shut: reading until the peer closes, or kCloseWait
  };

  std::shared_ptr<Connection> connection;
  Poco::Net::WebSocket socket;  // owns the descriptor (and the TLS connection)
  int fd = -1;
  tls::NonBlockingStream* tls = nullptr;  // wss://: its bytes go through this
  bool read_more = false;       // TLS holds decrypted bytes not read yet: read on the next turn
  bool read_wants_out = false;  // a TLS read waits for the socket to be writable
  bool write_wants_in = false;  // a TLS write waits for the socket to be readable
  std::vector<char> in;         // read bytes: [in_begin, in_end) not yet taken as frames
  std::size_t in_begin = 0;
  std::size_t in_end = 0;
  std::string message;  // a text message being assembled from fragments
  bool in_message = false;
  std::string out;  // encoded and not yet written, from out_begin
  std::size_t out_begin = 0;
  std::deque<Connection::Outbound> batch;  // taken from the connection's queue; kept for capacity
  std::string text;
  bool watching_out = false;  // EPOLLOUT is in its interest set
  Phase phase = Phase::kOpen;
  bool discard_input = false;  // closing for a reason of ours: what the peer still sends is dropped
  bool ended = false;
  bool in_backlog = false;  // has frames or queued frames left for the next turn
  std::string why;          // why it is closing, for onClose
  Clock::time_point last_read;
  Clock::time_point last_written;  // the last time written bytes moved, while some wait
  Clock::time_point drain_until;
  Clock::time_point armed = Clock::time_point::max();  // its live entry in timers_

  explicit Slot(Adopted adopted)
      : connection(std::move(adopted.connection)),
        socket(adopted.socket),
        fd(socket.impl()->sockfd()),
        tls(adopted.tls) {}
};

}  // namespace dockhand::driver
