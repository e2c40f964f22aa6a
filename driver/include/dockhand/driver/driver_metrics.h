// DriverMetrics: what the driver counts for GET /metrics on its port (docs/operations.md#metrics):
// heartbeats, final task statuses, the time tasks wait to be placed, control API requests,
// frames, registrations, lost agents and authentication failures as counters; agents and the
// job's tasks by state, and each agent's memory and block bytes from its heartbeats, as gauges
// set from the scheduler at each scrape.
//
// Each DriverService counts into a registry of its own (what its /metrics serves), so that the
// counts DriverService::counters() reads are this driver's, not every driver's of the process.
//
// Threads: the counters are atomics, counted from any thread; setGauges() runs with the
// scheduler under DriverService's mutex.
#pragma once

#include <array>
#include <string>

#include "dockhand/driver/drop_reason.h"
#include "dockhand/driver/scheduler.h"
#include "dockhand/metrics/metrics.h"

namespace dockhand::driver {

class DriverMetrics {
 public:
  explicit DriverMetrics(metrics::Registry& registry);

  void heartbeat() { heartbeats_.inc(); }
  void frame() { frames_.inc(); }
  void badFrame() { bad_frames_.inc(); }
  void authFailure() { auth_failures_.inc(); }
  void registration() { registrations_.inc(); }
  void refusedRegistration() { refused_registrations_.inc(); }
  void agentLost() { agents_lost_.inc(); }
  // A connection the transport dropped on its own (AgentServer), by why.
  void connectionDropped(DropReason reason);

  // The counts so far (ServiceCounters).
  std::uint64_t frames() const { return frames_.value(); }
  std::uint64_t badFrames() const { return bad_frames_.value(); }
  std::uint64_t authFailures() const { return auth_failures_.value(); }
  std::uint64_t registrations() const { return registrations_.value(); }
  std::uint64_t refusedRegistrations() const { return refused_registrations_.value(); }
  std::uint64_t agentsLost() const { return agents_lost_.value(); }
  // A status update the scheduler took; only final states are counted.
  void taskStatus(protocol::TaskState state);
  // A launch the scheduler decided, how long its task waited for a place, and whether it was
  // sent ahead of its agent's free cores (Action::ahead).
  void launched(SteadyClock::duration waited, bool ahead);
  // A task sent ahead was recalled from its agent to run elsewhere (Action::recall).
  void recalled();
  // A control API request and the status it was answered with.
  void controlRequest(const std::string& method, int status);
  // Agents and tasks by state, from the scheduler (under its lock).
  void setGauges(const Scheduler& scheduler);

 private:
  metrics::Counter& heartbeats_;
  metrics::Counter& frames_;
  metrics::Counter& bad_frames_;
  metrics::Counter& auth_failures_;
  metrics::Counter& registrations_;
  metrics::Counter& refused_registrations_;
  metrics::Counter& agents_lost_;
  metrics::Counter& launches_;
  metrics::Counter& launches_ahead_;
  metrics::Counter& recalled_;
  std::array<metrics::Counter*, 5> task_ends_{};  // by protocol::TaskState
  metrics::Histogram& scheduling_latency_;
  metrics::Family<metrics::Counter>& control_requests_;
  metrics::Family<metrics::Counter>& dropped_;
  metrics::Family<metrics::Gauge>& agents_;
  metrics::Family<metrics::Gauge>& tasks_;
  // Per agent, from its heartbeats: set anew at each scrape (an agent gone has no series).
  metrics::Family<metrics::Gauge>& agent_memory_;
  metrics::Family<metrics::Gauge>& agent_block_bytes_;
  metrics::Family<metrics::Gauge>& agent_threads_;
};

}  // namespace dockhand::driver
