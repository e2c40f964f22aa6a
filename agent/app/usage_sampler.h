// UsageSampler: what the agent holds, for its heartbeats (protocol::AgentMetrics): its own
// process (resident memory now and at its peak, CPU time) from /proc/self, and the resident
// memory of every process it started (its tasks' process trees, library workers) from one pass
// over /proc. That pass costs about 20 µs a process on the machine, so it is made at most once
// per `tree_every` (a heartbeat in between reuses the last figure); the task peaks between two
// passes come from the tasks that ended (their runners' wait4 figures, added by the Backend).
// Core thread only.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>

#include "dockhand/protocol/usage.h"

namespace dockhand::agent {

class UsageSampler {
 public:
  explicit UsageSampler(std::chrono::milliseconds tree_every = std::chrono::seconds(1))
      : tree_every_(tree_every) {}

  // The process figures now (blocks are the caller's to add).
  protocol::AgentMetrics sample();

 private:
  std::chrono::milliseconds tree_every_;
  std::optional<std::chrono::steady_clock::time_point> tree_at_;
  std::uint64_t tree_rss_ = 0;
};

}  // namespace dockhand::agent
