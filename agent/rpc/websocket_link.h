// WebSocketLink: the agent's connection to the driver (DriverLink over a Poco WebSocket).
//
// One I/O thread per connection attempt connects and performs the Hello handshake. Then, with
// `read_on_core_thread` over a plain ws:// connection, the core thread reads the socket itself
// (EventSink::watch): a LaunchTask reaches the Backend with no thread in between, and the I/O
// thread only fails asks whose time is up. Otherwise (wss://, or a sink that cannot watch) the
// I/O thread reads frames until the connection ends and posts them. Everything the link learns
// reaches the core thread: connect results, frames, replies to asks (as their callbacks), the
// loss of the connection. Sending happens on the caller's thread (the core thread) under a
// mutex, so a status update leaves without a thread hop.
//
// On the core thread a frame is read only once it is whole in the read-ahead buffer (64 KiB);
// a longer one is read to its end as it comes, as the I/O thread would.
//
// A malformed frame from the driver is answered with an Error (or a failed Reply when it had
// an ask id) and reading goes on. So is a frame over the size limit: its header gives its
// length, so its payload is read in bounded pieces and dropped (net/websocket_frames.h), it is
// answered with frame_too_large, and the next frame is read as usual.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <Poco/Net/Context.h>

#include "core/ports.h"
#include "dockhand/net/websocket_frames.h"
#include "dockhand/protocol/auth.h"
#include "rpc/link_metrics.h"

namespace Poco::Net {
class WebSocket;
}

namespace dockhand::agent {

class WebSocketLink final : public DriverLink {
 public:
  struct Options {
    std::string url;  // ws://host:port/path, or wss:// with `tls`
    Millis connect_timeout{5000};
    Millis handshake_timeout{10000};
    std::size_t max_frame_bytes = protocol::kDefaultMaxFrameBytes;
    std::string software;  // sent in Hello, e.g. "dockhand 0.1.0"
    // The cluster secret: set, the handshake proves both sides know it (docs/security.md).
    std::optional<protocol::auth::ClusterSecret> secret;
    // The TLS client context for a wss:// URL (docs/security.md); null: plain ws:// only.
    Poco::Net::Context::Ptr tls;
    // Where the link's counters go (rpc/link_metrics.h); null: a registry of its own.
    metrics::Registry* metrics = nullptr;
    // Plain ws:// connections are read on the core thread (the sink's watch()); see above.
    bool read_on_core_thread = false;
  };

  // What the link learns reaches `events` on the core thread (posted through `sink`). Both
  // must outlive the link; the link only stores them while it is built.
  WebSocketLink(Options options, EventSink& sink, DriverEvents& events);
  ~WebSocketLink() override;

  void connect() override;
  bool connected() const override { return connected_.load(std::memory_order_acquire); }
  bool send(const protocol::Envelope& message) override;
  bool sendEncoded(std::string_view type, const std::string& text) override;
  void ask(protocol::Envelope message, Millis timeout, AskCallback done) override;
  void close() override;

  // Frames sent from the calling thread (the core thread) over a plain connection are kept
  // and written together by flush(), which EventLoop's idle hook calls once the thread
  // has run what was posted: a task's RUNNING and FINISHED, or the statuses of several tasks,
  // leave in one write. Sends from other threads, and over TLS, go out at once (after what
  // is kept, in order). Call on the core thread before it starts its loop.
  void batchSendsFromThisThread() { batching_thread_ = std::this_thread::get_id(); }
  // Writes the kept frames. Any thread; never throws.
  void flush() override;
  // The most kept before a send writes them at once.
  static constexpr std::size_t kMaxBatchBytes = std::size_t{64} * 1024;

  // Frames that arrived malformed since start (for the status output and tests).
  std::uint64_t malformedFrames() const { return malformed_frames_.load(); }

 private:
  struct PendingAsk {
    AskCallback done;
    TimePoint deadline;
  };

  void run();
  // Hello (and, with a secret, the proofs both ways). A failure says whether trying again may
  // help (retryable) and, when either side refused the other's proof, has the code
  // protocol::error_code::kAuthFailed.
  Result<void> handshake(Poco::Net::WebSocket& ws);
  // The next text frame during the handshake, decoded; an error that is not retryable when
  // the peer does not speak the protocol.
  Result<protocol::Envelope> receiveHandshakeFrame(Poco::Net::WebSocket& ws);
  // Tells the driver why this agent refuses it, then closes (the handshake's end).
  void refuseDriver(Poco::Net::WebSocket& ws, const std::string& why);
  void readLoop(Poco::Net::WebSocket& ws);
  // What one frame from the driver asks for; false when it ends the connection (`reason` then
  // says why). `on_core`: called on the core thread, so frames go to the Backend at once.
  bool handleFrame(Poco::Net::WebSocket& ws, const net::ReceivedFrame& frame,
                   const std::vector<char>& payload, bool on_core, std::string& reason);
  void handleText(std::string_view text, bool on_core);
  // The core thread's reading (read_on_core_thread): starts it once the Backend has heard of
  // the connection, reads what the socket has (or only what is buffered), ends it.
  void startCoreReads(const std::shared_ptr<Poco::Net::WebSocket>& ws);
  void readOnCore(bool socket_ready);
  void endOnCore(const std::string& reason);
  // The I/O thread while the core thread reads: fails asks whose time is up, until the
  // connection ends or the link closes.
  void waitForAsks();
  // The end of a connection, once (the reader's, the core thread's or close()'s): the socket
  // closed, pending asks failed, and, unless the link is closing, the Backend told.
  void endConnection(const std::string& reason);
  bool sendText(const std::string& text);
  void failPendingAsks(std::string_view code, const std::string& message, bool only_expired);
  // Ends the reader's wait in poll(2) (a new ask, close, destruction).
  void wakeReader();
  // How long the reader may wait for a frame: until the first ask's deadline, or no limit.
  int readerTimeoutMs();
  void postAskResult(AskCallback done, AskResult result);

  Options options_;
  EventSink& sink_;
  DriverEvents& events_;

  std::thread thread_;
  std::atomic<bool> connected_{false};
  std::atomic<bool> closing_{false};
  std::atomic<std::uint64_t> malformed_frames_{0};
  std::unique_ptr<metrics::Registry> own_metrics_;  // options_.metrics unset
  LinkMetrics metrics_;

  // Writes `batch_` (under send_mutex_); false when the write failed (the frames are dropped:
  // the connection is gone, and the reader says so).
  bool flushLocked();
  std::uint32_t nextMask();

  // Guards socket_ writes; over TLS, reads too (an OpenSSL connection is not to be used by
  // two threads at once), taken by the reader only once data is there to read.
  std::mutex send_mutex_;
  std::shared_ptr<Poco::Net::WebSocket> socket_;  // set while connected
  std::thread::id batching_thread_;               // whose sends are kept (batchSendsFromThisThread)
  std::string batch_;                             // masked frames kept, under send_mutex_
  std::uint64_t mask_state_ = 1;                  // xorshift64 for the frames' masking keys

  std::mutex asks_mutex_;
  std::map<std::uint64_t, PendingAsk> asks_;
  std::atomic<std::uint64_t> next_id_{1};
  // An eventfd that wakes the reader; -1 when none could be made (it then polls every 200 ms).
  int wake_fd_ = -1;
  // The frames of the current connection, read ahead (the reading thread's alone: the I/O
  // thread's, or the core thread's once startCoreReads has run).
  std::optional<net::FrameReader> reader_;
  std::atomic<bool> ended_{false};   // endConnection ran for the current connection
  std::atomic<int> watched_fd_{-1};  // the socket the core thread watches, -1: none
  std::shared_ptr<Poco::Net::WebSocket> core_socket_;  // the core thread's alone
  std::vector<char> core_payload_;                     // likewise
};

}  // namespace dockhand::agent
