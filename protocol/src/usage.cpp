#include "dockhand/protocol/usage.h"

#include <cmath>

namespace dockhand::protocol {

const std::array<MetricField<TaskMetrics>, 11> kTaskMetricFields = {{
    {"run_time_ms", &TaskMetrics::run_time_ms},
    {"cpu_time_ms", &TaskMetrics::cpu_time_ms},
    {"peak_rss_bytes", &TaskMetrics::peak_rss_bytes},
    {"result_bytes", &TaskMetrics::result_bytes},
    {"io_read_bytes", &TaskMetrics::io_read_bytes},
    {"io_write_bytes", &TaskMetrics::io_write_bytes},
    {"input_blocks", &TaskMetrics::input_blocks},
    {"input_bytes", &TaskMetrics::input_bytes},
    {"input_fetch_ms", &TaskMetrics::input_fetch_ms},
    {"output_blocks", &TaskMetrics::output_blocks},
    {"output_bytes", &TaskMetrics::output_bytes},
}};

const std::array<MetricField<AgentMetrics>, 8> kAgentMetricFields = {{
    {"rss_bytes", &AgentMetrics::rss_bytes},
    {"peak_rss_bytes", &AgentMetrics::peak_rss_bytes},
    {"cpu_time_ms", &AgentMetrics::cpu_time_ms},
    {"threads", &AgentMetrics::threads},
    {"tasks_rss_bytes", &AgentMetrics::tasks_rss_bytes},
    {"peak_tasks_rss_bytes", &AgentMetrics::peak_tasks_rss_bytes},
    {"blocks", &AgentMetrics::blocks},
    {"block_bytes", &AgentMetrics::block_bytes},
}};

namespace {

void drop(std::vector<std::string>* dropped, std::string_view name, std::string_view why) {
  if (dropped) dropped->push_back(std::string(name) + ": " + std::string(why));
}

template <class Figures, std::size_t N>
bool anyFigure(const Figures& figures, const std::array<MetricField<Figures>, N>& fields) {
  for (const auto& field : fields) {
    if (figures.*field.member) return true;
  }
  return false;
}

template <class Figures, std::size_t N>
void putFigures(const Figures& figures, const std::array<MetricField<Figures>, N>& fields,
                nlohmann::json& out) {
  for (const auto& field : fields) {
    if (const auto& value = figures.*field.member) out[std::string(field.name)] = *value;
  }
}

// The known figures of `object` into `figures` (the one rule: a non-negative integer); false
// when `object` is not an object (no figures at all).
template <class Figures, std::size_t N>
bool readFigures(const nlohmann::json& object, const std::array<MetricField<Figures>, N>& fields,
                 Figures& figures, std::vector<std::string>* dropped) {
  if (!object.is_object()) {
    drop(dropped, "metrics", "not an object");
    return false;
  }
  for (const auto& field : fields) {
    auto it = object.find(field.name);
    if (it == object.end()) continue;
    if (it->is_number_unsigned()) {
      figures.*field.member = it->template get<std::uint64_t>();
    } else if (it->is_number_integer() && it->template get<std::int64_t>() >= 0) {
      figures.*field.member = static_cast<std::uint64_t>(it->template get<std::int64_t>());
    } else if (it->is_number_integer()) {
      drop(dropped, field.name, "negative");
    } else {
      drop(dropped, field.name, "not an integer");
    }
  }
  return true;
}

}  // namespace

bool AgentMetrics::empty() const { return !anyFigure(*this, kAgentMetricFields); }

nlohmann::json toJson(const AgentMetrics& metrics) {
  nlohmann::json j = nlohmann::json::object();
  putFigures(metrics, kAgentMetricFields, j);
  return j;
}

AgentMetrics agentMetricsFromJson(const nlohmann::json& object, std::vector<std::string>* dropped) {
  AgentMetrics metrics;
  readFigures(object, kAgentMetricFields, metrics, dropped);
  return metrics;
}

bool TaskMetrics::empty() const { return !anyFigure(*this, kTaskMetricFields) && custom.empty(); }

void TaskMetrics::merge(const TaskMetrics& other) {
  for (const auto& field : kTaskMetricFields) {
    if (other.*field.member) this->*field.member = other.*field.member;
  }
  for (const auto& [name, value] : other.custom) custom[name] = value;
}

nlohmann::json toJson(const TaskMetrics& metrics) {
  nlohmann::json j = nlohmann::json::object();
  putFigures(metrics, kTaskMetricFields, j);
  if (!metrics.custom.empty()) j["custom"] = metrics.custom;
  return j;
}

TaskMetrics taskMetricsFromJson(const nlohmann::json& object, std::vector<std::string>* dropped) {
  TaskMetrics metrics;
  if (!readFigures(object, kTaskMetricFields, metrics, dropped)) return metrics;
  if (auto it = object.find("custom"); it != object.end()) {
    if (!it->is_object()) {
      drop(dropped, "custom", "not an object");
      return metrics;
    }
    for (const auto& [name, value] : it->items()) {
      if (!value.is_number()) {
        drop(dropped, name, "not a number");
      } else if (const double number = value.get<double>(); !std::isfinite(number) || number < 0) {
        drop(dropped, name, "negative");
      } else {
        metrics.custom[name] = number;
      }
    }
  }
  return metrics;
}

}  // namespace dockhand::protocol
