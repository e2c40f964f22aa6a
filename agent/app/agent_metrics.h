// AgentGauges: the agent's gauges that describe a state rather than count events (running
// tasks, cores and resource addresses in use, blocks stored, the agent's state and its
// decommission's phase and progress). They are set from the agent's snapshot (AgentSnapshot,
// which the core thread makes when a scrape asks for it) each time /metrics is scraped, so
// that nothing on the task path keeps them. docs/operations.md#metrics lists them.
//
// Threads: update() may run on several block server threads at once (each sets the same
// values from its own copy of the snapshot).
#pragma once

#include "app/agent_snapshot.h"
#include "dockhand/metrics/metrics.h"

namespace dockhand::agent {

class AgentGauges {
 public:
  explicit AgentGauges(metrics::Registry& registry);
  // Sets every gauge from `snapshot`.
  void update(const AgentSnapshot& snapshot);

 private:
  metrics::Family<metrics::Gauge>& state_;
  metrics::Gauge& running_tasks_;
  metrics::Gauge& waiting_tasks_;
  metrics::Gauge& cores_;
  metrics::Gauge& cores_in_use_;
  metrics::Family<metrics::Gauge>& addresses_;
  metrics::Family<metrics::Gauge>& addresses_in_use_;
  metrics::Gauge& blocks_;
  metrics::Gauge& block_bytes_;
  metrics::Family<metrics::Gauge>& phase_;
  metrics::Family<metrics::Gauge>& decommission_blocks_;
  metrics::Family<metrics::Gauge>& decommission_bytes_;
  metrics::Gauge& decommission_rate_;
  metrics::Gauge& decommission_eta_;
};

}  // namespace dockhand::agent
