// SampleStats: order statistics of a set of timings (nearest-rank percentiles).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <numeric>
#include <vector>

namespace dockhand::bench {

class SampleStats {
 public:
  SampleStats() = default;
  explicit SampleStats(std::vector<double> samples) : sorted_(std::move(samples)) {
    std::sort(sorted_.begin(), sorted_.end());
  }

  std::size_t count() const { return sorted_.size(); }
  bool empty() const { return sorted_.empty(); }

  // Nearest-rank percentile, p in [0, 100]; NaN when there are no samples.
  double percentile(double p) const {
    if (sorted_.empty()) return std::nan("");
    auto rank = static_cast<std::size_t>(std::ceil(p / 100.0 * static_cast<double>(count())));
    if (rank == 0) rank = 1;
    return sorted_[std::min(rank, count()) - 1];
  }
  double median() const { return percentile(50); }
  double min() const { return sorted_.empty() ? std::nan("") : sorted_.front(); }
  double max() const { return sorted_.empty() ? std::nan("") : sorted_.back(); }
  double mean() const {
    if (sorted_.empty()) return std::nan("");
    return std::accumulate(sorted_.begin(), sorted_.end(), 0.0) / static_cast<double>(count());
  }

 private:
  std::vector<double> sorted_;
};

}  // namespace dockhand::bench
