// StatusBoard: the agent's state for GET /v1/status, /metrics and /readyz, made on the core
// thread when a reader on the block server's threads asks for it (nothing is made while nobody
// asks) and read there.
//
// Threads: set() and close() from the core thread (or after it ended), fresh() from any.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>

#include <nlohmann/json.hpp>

#include "app/agent_snapshot.h"

namespace dockhand::agent {

// The agent's state at one moment: as GET /v1/status shows it, and typed.
struct AgentStatus {
  nlohmann::json json = nlohmann::json::object();
  AgentSnapshot snapshot;
};

class StatusBoard {
 public:
  void set(AgentStatus status);
  // A status made after this call: `request` has the core thread make one (set()), unless a
  // request is on its way already. Waits up to `wait` for it; then, or once closed, the last
  // one.
  AgentStatus fresh(const std::function<void()>& request, std::chrono::milliseconds wait);
  // The core thread has ended: fresh() answers at once.
  void close();

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::uint64_t generation_ = 0;
  bool requested_ = false;
  bool closed_ = false;
  AgentStatus status_;
};

}  // namespace dockhand::agent
