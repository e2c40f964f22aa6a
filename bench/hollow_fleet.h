// HollowFleet: many simulated agents in this one process (`dockhand-fleet-bench --simulated`),
// each a WebSocket connection to the real driver speaking the real protocol (protocol/), so that
// the driver is measured at a scale that real agents, one process each, cannot reach on one
// machine (what Kubernetes' kubemark does with its "hollow nodes").
//
// Each simulated agent: Hello, RegisterExecutor (its cores, a block_url nobody fetches from),
// LaunchedExecutor; a Heartbeat every heartbeat_ms with the blocks it holds; a LaunchTask is
// answered FINISHED at once (the bench job library's "fill" reports its block rdd_1_<partition>,
// 16 KiB, with UpdateBlockInfo first, as the real agent does); DecommissionExecutor:
// ExecutorDecommissioning, GetPeers, its blocks handed to the peers (each peer reports them,
// it reports them removed), RemoveExecutor("decommission finished"), then it closes;
// StopExecutor: it closes. No task runs and no block has bytes: what is measured is the driver.
//
// Threads: one, an epoll loop over every connection (non-blocking sockets), from start() to the
// destructor. The other members may be called from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <ctime>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>

namespace dockhand::bench {

class HollowFleet {
 public:
  explicit HollowFleet(std::chrono::milliseconds heartbeat = std::chrono::seconds(10));
  ~HollowFleet();
  HollowFleet(const HollowFleet&) = delete;
  HollowFleet& operator=(const HollowFleet&) = delete;

  // Agents a1..a<count> with `cores` each, connecting to 127.0.0.1:`port` (again every 10 ms
  // while nothing listens there, as real agents retry).
  void start(int count, int cores, int port);

  // Waits until agent `id` closed its connection after RemoveExecutor (true), or `timeout`.
  bool waitGone(const std::string& id, std::chrono::milliseconds timeout);
  // Waits until every agent's connection is closed (the driver stopped them), or `timeout`.
  bool waitAllGone(std::chrono::milliseconds timeout);
  // CPU seconds the loop thread used so far.
  double cpuSeconds() const;
  // The first thing the driver said that a real agent would not have expected (an Error frame,
  // a refused registration, a failed upgrade); "" when none.
  std::string surprise() const;

 private:
  struct Agent;
  void loop();
  void connect(Agent& a);
  void onReadable(Agent& a);
  void onFrame(Agent& a, std::string_view text);
  void send(Agent& a, const std::string& frame_text);
  void flush(Agent& a);
  void close(Agent& a, bool gone);
  void migrate(Agent& a, const std::string& peers_reply_body);
  void noteSurprise(const std::string& what);

  const std::chrono::milliseconds heartbeat_;
  int port_ = 0;
  int epoll_fd_ = -1;
  std::map<int, std::unique_ptr<Agent>> agents_;  // by number (1..count); the loop's own
  std::map<std::string, Agent*> by_id_;           // the loop's own
  mutable std::mutex mutex_;                      // guards gone_ and surprise_
  std::map<std::string, bool> gone_;              // by id: its connection ended
  std::string surprise_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  std::optional<clockid_t> cpu_clock_;  // the loop thread's, set by start()
};

}  // namespace dockhand::bench
