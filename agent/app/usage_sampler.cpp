#include "app/usage_sampler.h"

#include <cmath>

#include "dockhand/metrics/process_stats.h"

namespace dockhand::agent {

protocol::AgentMetrics UsageSampler::sample() {
  protocol::AgentMetrics figures;
  if (const auto self = metrics::readProcessStats()) {
    figures.rss_bytes = self->rss_bytes;
    figures.peak_rss_bytes = self->peak_rss_bytes;
    figures.cpu_time_ms = static_cast<std::uint64_t>(std::llround(self->cpu_seconds * 1000.0));
    figures.threads = self->threads;
  }
  const auto now = std::chrono::steady_clock::now();
  if (!tree_at_ || now - *tree_at_ >= tree_every_) {
    tree_rss_ = metrics::descendantsRssBytes(0);
    tree_at_ = now;
  }
  figures.tasks_rss_bytes = tree_rss_;
  return figures;
}

}  // namespace dockhand::agent
