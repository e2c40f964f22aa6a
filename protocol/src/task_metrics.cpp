#include "dockhand/protocol/task_metrics.h"

#include <cmath>

namespace dockhand::protocol {

const std::array<TaskMetricField, 11> kTaskMetricFields = {{
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

bool TaskMetrics::empty() const {
  for (const auto& field : kTaskMetricFields) {
    if (this->*field.member) return false;
  }
  return custom.empty();
}

void TaskMetrics::merge(const TaskMetrics& other) {
  for (const auto& field : kTaskMetricFields) {
    if (other.*field.member) this->*field.member = other.*field.member;
  }
  for (const auto& [name, value] : other.custom) custom[name] = value;
}

nlohmann::json toJson(const TaskMetrics& metrics) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& field : kTaskMetricFields) {
    if (const auto& value = metrics.*field.member) j[std::string(field.name)] = *value;
  }
  if (!metrics.custom.empty()) j["custom"] = metrics.custom;
  return j;
}

namespace {

void drop(std::vector<std::string>* dropped, std::string_view name, std::string_view why) {
  if (dropped) dropped->push_back(std::string(name) + ": " + std::string(why));
}

}  // namespace

TaskMetrics taskMetricsFromJson(const nlohmann::json& object, std::vector<std::string>* dropped) {
  TaskMetrics metrics;
  if (!object.is_object()) {
    drop(dropped, "metrics", "not an object");
    return metrics;
  }
  for (const auto& field : kTaskMetricFields) {
    auto it = object.find(field.name);
    if (it == object.end()) continue;
    if (it->is_number_unsigned()) {
      metrics.*field.member = it->get<std::uint64_t>();
    } else if (it->is_number_integer() && it->get<std::int64_t>() >= 0) {
      metrics.*field.member = static_cast<std::uint64_t>(it->get<std::int64_t>());
    } else if (it->is_number_integer()) {
      drop(dropped, field.name, "negative");
    } else {
      drop(dropped, field.name, "not an integer");
    }
  }
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
