// FakeDriver: a scripted driver for agent integration tests. It listens on 127.0.0.1 (an
// ephemeral port), answers Hello, RetrieveAppConfig and RegisterExecutor itself, records every
// frame the agent sends, and lets the test send any frame (also malformed ones) to the agent.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "dockhand/protocol/envelope.h"
#include "dockhand/protocol/messages.h"
#include "support/process.h"

namespace Poco::Net {  // NOLINT(readability-identifier-naming): Poco's namespace
class HTTPServer;
class WebSocket;
}  // namespace Poco::Net

namespace dockhand::testing {

class FakeDriver {
 public:
  struct Options {
    std::map<std::string, std::string> properties = {{"dockhand.heartbeat.interval_ms", "200"}};
    bool refuse_registration = false;
    // The answer to ExecutorDecommissioning: {"accepted": accept_decommission}.
    bool accept_decommission = true;
    // Set: the fake authenticates like the real driver with this secret (it requires the
    // agent's proof and proves itself). A wrong one makes it an impostor.
    std::optional<std::string> secret;
    // The resource profile of the app config the agent retrieves.
    protocol::ResourceProfile resource_profile;
    // Set: a ResumeExecutor is accepted (counting as running there the tasks it lists), as a
    // driver that held the agent would; otherwise refused with not_resumable, as a restarted
    // driver would.
    bool accept_resume = false;
  };

  FakeDriver();
  explicit FakeDriver(Options options);
  ~FakeDriver();

  int port() const { return port_; }
  std::string url() const { return "ws://127.0.0.1:" + std::to_string(port_) + "/"; }

  // Waits until an agent has registered (LaunchedExecutor received).
  bool waitForRegistration(Millis timeout);
  // Waits for the next frame from the agent that matches `match` (frames before it that do
  // not match are kept for later waits). Replies to the fake's own asks are included.
  std::optional<protocol::Envelope> waitFor(
      const std::function<bool(const protocol::Envelope&)>& match, Millis timeout);
  std::optional<protocol::Envelope> waitForType(const std::string& type, Millis timeout);
  // Waits for the StatusUpdate that reports `state` for `task_id`.
  std::optional<protocol::StatusUpdate> waitForStatus(std::uint64_t task_id,
                                                      protocol::TaskState state,
                                                      Millis timeout = Millis(15000));

  // Every frame the agent sent so far, in order (waitFor does not remove from this).
  std::vector<protocol::Envelope> history() const;
  // The peers GetPeers is answered with ({"peers": [...]}); none at first.
  void setPeers(std::vector<protocol::Peer> peers);
  // The block_url of the agent's RegisterExecutor ("" before it registered).
  std::string agentBlockUrl() const;

  bool send(const protocol::Envelope& frame);
  bool sendRaw(const std::string& text);
  // Closes the agent's connection abruptly (no close frame).
  void dropConnection();
  bool connected() const;

  // Called by the server's connection handler.
  void serve(Poco::Net::WebSocket& ws);

 private:
  void record(protocol::Envelope frame);

  Options options_;
  std::unique_ptr<Poco::Net::HTTPServer> server_;
  int port_ = 0;

  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<protocol::Envelope> received_;
  std::vector<protocol::Envelope> history_;
  std::vector<protocol::Peer> peers_;
  std::string block_url_;
  std::string agent_nonce_;
  std::string driver_nonce_;
  bool registered_ = false;
  bool stopping_ = false;
  std::shared_ptr<Poco::Net::WebSocket> socket_;
};

}  // namespace dockhand::testing
