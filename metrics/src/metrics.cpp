#include "dockhand/metrics/metrics.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

namespace dockhand::metrics {
namespace {

bool validName(const std::string& name, bool allow_colon) {
  if (name.empty()) return false;
  for (std::size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool letter =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (allow_colon && c == ':');
    const bool digit = c >= '0' && c <= '9';
    if (!letter && !(digit && i > 0)) return false;
  }
  return true;
}

// HELP text: backslash and line feed escaped.
std::string escapeHelp(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

// A label value: backslash, double quote and line feed escaped.
std::string escapeLabel(const std::string& value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string formatValue(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  return fmt::format("{}", value);
}

// {a="x",b="y"} with an extra label last (a histogram's le); "" when there is none.
std::string labelSet(const std::vector<std::string>& names, const std::vector<std::string>& values,
                     const std::string& extra_name = {}, const std::string& extra_value = {}) {
  if (names.empty() && extra_name.empty()) return {};
  std::string out = "{";
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (i > 0) out += ',';
    out += names[i] + "=\"" + escapeLabel(values[i]) + '"';
  }
  if (!extra_name.empty()) {
    if (!names.empty()) out += ',';
    out += extra_name + "=\"" + extra_value + '"';
  }
  out += '}';
  return out;
}

void header(std::string& out, const std::string& name, const std::string& help, const char* type) {
  out += "# HELP " + name + ' ' + escapeHelp(help) + '\n';
  out += "# TYPE " + name + ' ' + type + '\n';
}

void checkBounds(const std::vector<double>& bounds) {
  for (std::size_t i = 0; i < bounds.size(); ++i) {
    if (!std::isfinite(bounds[i]) || (i > 0 && bounds[i] <= bounds[i - 1])) {
      throw std::logic_error("histogram buckets must be finite and strictly increasing");
    }
  }
}

}  // namespace

void Gauge::add(double delta) { value_.fetch_add(delta, std::memory_order_relaxed); }

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)),
      buckets_(std::make_unique<std::atomic<std::uint64_t>[]>(bounds_.size() + 1)) {
  checkBounds(bounds_);
}

void Histogram::observe(double value) {
  // Few buckets: a linear scan beats a binary search's branches.
  std::size_t i = 0;
  while (i < bounds_.size() && value > bounds_[i]) ++i;
  buckets_[i].fetch_add(1, std::memory_order_relaxed);
  sum_.fetch_add(value, std::memory_order_relaxed);
}

std::vector<std::uint64_t> Histogram::cumulativeCounts() const {
  std::vector<std::uint64_t> out(bounds_.size() + 1);
  std::uint64_t running = 0;
  for (std::size_t i = 0; i < out.size(); ++i) {
    running += buckets_[i].load(std::memory_order_relaxed);
    out[i] = running;
  }
  return out;
}

std::uint64_t Histogram::count() const { return cumulativeCounts().back(); }

std::vector<double> durationBuckets() {
  return {0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 120, 300};
}

std::vector<double> latencyBuckets() {
  return {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
          0.05,   0.1,     0.25,   0.5,   1,      2.5,   5,    10};
}

std::vector<double> memoryBuckets() {
  std::vector<double> bounds;
  for (double bytes = 1 << 20; bytes <= 64.0 * (1 << 30); bytes *= 4) bounds.push_back(bytes);
  return bounds;
}

template <class Metric>
Family<Metric>::Family(std::string name, std::string help, std::vector<std::string> label_names,
                       std::vector<double> bounds)
    : name_(std::move(name)),
      help_(std::move(help)),
      label_names_(std::move(label_names)),
      bounds_(std::move(bounds)) {
  if (!validName(name_, /*allow_colon=*/true)) {
    throw std::logic_error("invalid metric name '" + name_ + "'");
  }
  for (const std::string& label : label_names_) {
    if (!validName(label, /*allow_colon=*/false) || label.starts_with("__") || label == "le") {
      throw std::logic_error("metric " + name_ + ": invalid label name '" + label + "'");
    }
  }
  // A family without labels has its one child from the start, so it is exposed (as 0) before
  // anything counted.
  if (label_names_.empty()) labels({});
}

template <class Metric>
Metric& Family<Metric>::labels(const std::vector<std::string>& values) {
  if (values.size() != label_names_.size()) {
    throw std::logic_error(fmt::format("metric {}: {} label values for {} labels", name_,
                                       values.size(), label_names_.size()));
  }
  std::lock_guard lock(mutex_);
  auto it = children_.find(values);
  if (it != children_.end()) return *it->second;
  std::unique_ptr<Metric> metric;
  if constexpr (std::is_same_v<Metric, Histogram>) {
    metric = std::make_unique<Histogram>(bounds_);
  } else {
    metric = std::make_unique<Metric>();
  }
  Metric& out = *metric;
  children_.emplace(values, std::move(metric));
  return out;
}

template class Family<Counter>;
template class Family<Gauge>;
template class Family<Histogram>;

Registry::Entry& Registry::entry(const std::string& name, const std::string& help, Type type,
                                 const std::vector<std::string>& label_names,
                                 const std::vector<double>& bounds) {
  // Under the lock.
  auto it = by_name_.find(name);
  if (it == by_name_.end()) {
    auto entry = std::make_unique<Entry>();
    entry->type = type;
    switch (type) {
      case Type::kCounter:
        entry->counter = std::make_unique<Family<Counter>>(name, help, label_names);
        break;
      case Type::kGauge:
        entry->gauge = std::make_unique<Family<Gauge>>(name, help, label_names);
        break;
      case Type::kHistogram:
        entry->histogram = std::make_unique<Family<Histogram>>(name, help, label_names, bounds);
        break;
    }
    Entry& out = *entry;
    entries_.push_back(std::move(entry));
    by_name_.emplace(name, &out);
    return out;
  }
  Entry& found = *it->second;
  const std::vector<std::string>* names = nullptr;
  bool same_bounds = true;
  switch (found.type) {
    case Type::kCounter:
      names = &found.counter->labelNames();
      break;
    case Type::kGauge:
      names = &found.gauge->labelNames();
      break;
    case Type::kHistogram:
      names = &found.histogram->labelNames();
      same_bounds = found.histogram->bounds() == bounds;
      break;
  }
  if (found.type != type || *names != label_names || !same_bounds) {
    throw std::logic_error("metric " + name +
                           " registered again with another type, labels or buckets");
  }
  return found;
}

Family<Counter>& Registry::counter(const std::string& name, const std::string& help,
                                   const std::vector<std::string>& label_names) {
  std::lock_guard lock(mutex_);
  return *entry(name, help, Type::kCounter, label_names, {}).counter;
}

Family<Gauge>& Registry::gauge(const std::string& name, const std::string& help,
                               const std::vector<std::string>& label_names) {
  std::lock_guard lock(mutex_);
  return *entry(name, help, Type::kGauge, label_names, {}).gauge;
}

Family<Histogram>& Registry::histogram(const std::string& name, const std::string& help,
                                       const std::vector<std::string>& label_names,
                                       const std::vector<double>& bounds) {
  checkBounds(bounds);
  std::lock_guard lock(mutex_);
  return *entry(name, help, Type::kHistogram, label_names, bounds).histogram;
}

std::string Registry::expose() const {
  std::lock_guard lock(mutex_);
  std::string out;
  for (const auto& entry : entries_) {
    switch (entry->type) {
      case Type::kCounter: {
        const Family<Counter>& family = *entry->counter;
        header(out, family.name(), family.help(), "counter");
        family.forEach([&](const std::vector<std::string>& values, const Counter& counter) {
          out += family.name() + labelSet(family.labelNames(), values) + ' ' +
                 std::to_string(counter.value()) + '\n';
        });
        break;
      }
      case Type::kGauge: {
        const Family<Gauge>& family = *entry->gauge;
        header(out, family.name(), family.help(), "gauge");
        family.forEach([&](const std::vector<std::string>& values, const Gauge& gauge) {
          out += family.name() + labelSet(family.labelNames(), values) + ' ' +
                 formatValue(gauge.value()) + '\n';
        });
        break;
      }
      case Type::kHistogram: {
        const Family<Histogram>& family = *entry->histogram;
        header(out, family.name(), family.help(), "histogram");
        family.forEach([&](const std::vector<std::string>& values, const Histogram& histogram) {
          const std::vector<std::uint64_t> counts = histogram.cumulativeCounts();
          for (std::size_t i = 0; i < counts.size(); ++i) {
            const std::string le =
                i < histogram.bounds().size() ? formatValue(histogram.bounds()[i]) : "+Inf";
            out += family.name() + "_bucket" + labelSet(family.labelNames(), values, "le", le) +
                   ' ' + std::to_string(counts[i]) + '\n';
          }
          // The sum read after the buckets may include an observation they missed; the count
          // is the +Inf bucket's, as the format requires.
          out += family.name() + "_sum" + labelSet(family.labelNames(), values) + ' ' +
                 formatValue(histogram.sum()) + '\n';
          out += family.name() + "_count" + labelSet(family.labelNames(), values) + ' ' +
                 std::to_string(counts.back()) + '\n';
        });
        break;
      }
    }
  }
  return out;
}

void registerProcessInfo(Registry& registry, const std::string& program, const std::string& version,
                         const std::string& build) {
  registry
      .gauge("dockhand_build_info", "Always 1; the labels say which program, version and build.",
             {"program", "version", "build"})
      .labels({program, version, build})
      .set(1);
  registry
      .gauge("dockhand_process_start_time_seconds",
             "When the process started, in seconds since the Unix epoch.")
      .get()
      .set(std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
               .count());
}

Registry& registryOr(Registry* given, std::unique_ptr<Registry>& own) {
  if (given != nullptr) return *given;
  if (!own) own = std::make_unique<Registry>();
  return *own;
}

}  // namespace dockhand::metrics
