// Metrics: a Prometheus registry of counters, gauges and histograms with labels, written out in
// the text exposition format 0.0.4 (what `GET /metrics` of the agent and the driver answers).
//
//   auto& started = registry.counter("dockhand_tasks_started_total", "Tasks launched.");
//   started.get().inc();                                  // a family without labels
//   auto& ended = registry.counter("dockhand_tasks_ended_total", "...", {"state"});
//   Counter& failed = ended.labels({"FAILED"});           // look up once, keep the reference
//   failed.inc();                                         // one relaxed atomic add
//
// Cost: counting is lock-free (relaxed atomics, no allocation). Looking up a labelled child
// takes the family's mutex and, the first time, allocates the child: code on a hot path looks
// its children up once and keeps the references, which stay valid as long as the registry.
// Exposition takes each family's mutex in turn and reads the atomics; values read while others
// count are each exact, not a snapshot of one instant.
//
// Registering a name again returns the family registered first when its type, labels (and a
// histogram's buckets) agree, so that parts built more than once in a process (several plugin
// instances) share it; a disagreement is a bug and throws std::logic_error, as do names and
// label names Prometheus does not accept and a wrong number of label values.
//
// Threads: every call is thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace dockhand::metrics {

// A value that only goes up (resets when the process restarts).
class Counter {
 public:
  void inc(std::uint64_t n = 1) { value_.fetch_add(n, std::memory_order_relaxed); }
  std::uint64_t value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<std::uint64_t> value_{0};
};

// A value that goes up and down.
class Gauge {
 public:
  void set(double value) { value_.store(value, std::memory_order_relaxed); }
  void add(double delta);
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0.0};
};

// Observations counted into buckets by upper bound (the +Inf bucket is implied), with their
// count and sum.
class Histogram {
 public:
  // `bounds`: strictly increasing, finite.
  explicit Histogram(std::vector<double> bounds);
  void observe(double value);

  const std::vector<double>& bounds() const { return bounds_; }
  // Cumulative counts, one per bound and the last for +Inf; then the sum.
  std::vector<std::uint64_t> cumulativeCounts() const;
  double sum() const { return sum_.load(std::memory_order_relaxed); }
  std::uint64_t count() const;

 private:
  std::vector<double> bounds_;
  std::unique_ptr<std::atomic<std::uint64_t>[]> buckets_;  // bounds_.size() + 1, not cumulative
  std::atomic<double> sum_{0.0};
};

// Buckets for durations in seconds: 1 ms to 5 min.
std::vector<double> durationBuckets();
// Buckets for short latencies in seconds: 100 µs to 10 s.
std::vector<double> latencyBuckets();
// Buckets for memory in bytes: 1 MiB to 64 GiB, each four times the last.
std::vector<double> memoryBuckets();

enum class Type { kCounter, kGauge, kHistogram };

// The metrics of one name, one per combination of label values.
template <class Metric>
class Family {
 public:
  Family(std::string name, std::string help, std::vector<std::string> label_names,
         std::vector<double> bounds = {});

  // The child with these label values (as many as the family has label names), created at
  // its first use.
  Metric& labels(const std::vector<std::string>& values);
  // The one child of a family without labels.
  Metric& get() { return labels({}); }
  // Removes every child: for a family set anew at each scrape with a series per thing that
  // may go (one per agent), so that a thing gone has no series left. Never for a family whose
  // children someone holds a reference to.
  void clear() {
    std::lock_guard lock(mutex_);
    children_.clear();
  }

  const std::string& name() const { return name_; }
  const std::string& help() const { return help_; }
  const std::vector<std::string>& labelNames() const { return label_names_; }
  const std::vector<double>& bounds() const { return bounds_; }
  // Calls fn(label values, metric) for every child, ordered by label values.
  template <class Fn>
  void forEach(Fn&& fn) const {
    std::lock_guard lock(mutex_);
    for (const auto& [values, metric] : children_) fn(values, *metric);
  }

 private:
  std::string name_;
  std::string help_;
  std::vector<std::string> label_names_;
  std::vector<double> bounds_;
  mutable std::mutex mutex_;
  std::map<std::vector<std::string>, std::unique_ptr<Metric>> children_;
};

class Registry {
 public:
  Registry() = default;
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  Family<Counter>& counter(const std::string& name, const std::string& help,
                           const std::vector<std::string>& label_names = {});
  Family<Gauge>& gauge(const std::string& name, const std::string& help,
                       const std::vector<std::string>& label_names = {});
  Family<Histogram>& histogram(const std::string& name, const std::string& help,
                               const std::vector<std::string>& label_names,
                               const std::vector<double>& bounds);

  // The text exposition format 0.0.4: per family (in the order registered) its HELP and TYPE
  // lines, then its samples.
  std::string expose() const;

 private:
  struct Entry {
    Type type;
    std::unique_ptr<Family<Counter>> counter;
    std::unique_ptr<Family<Gauge>> gauge;
    std::unique_ptr<Family<Histogram>> histogram;
  };
  Entry& entry(const std::string& name, const std::string& help, Type type,
               const std::vector<std::string>& label_names, const std::vector<double>& bounds);

  mutable std::mutex mutex_;
  std::vector<std::unique_ptr<Entry>> entries_;
  std::map<std::string, Entry*, std::less<>> by_name_;
};

// No registry is process-wide: a program makes one (the agent's Agent, the driver's service)
// and hands it to each part that counts. A part given none counts into one of its own that
// nothing exposes (tests, the command-line tools): `given` when set, else `own`, made here.
Registry& registryOr(Registry* given, std::unique_ptr<Registry>& own);

// The process's own facts: dockhand_build_info{program, version, build} 1 and
// dockhand_process_start_time_seconds (the Unix time of this call; make it at start-up).
void registerProcessInfo(Registry& registry, const std::string& program, const std::string& version,
                         const std::string& build);

// The Content-Type of Registry::expose()'s output.
inline constexpr char kContentType[] = "text/plain; version=0.0.4; charset=utf-8";

}  // namespace dockhand::metrics
