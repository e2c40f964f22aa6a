#include "dockhand/protocol/task_frames.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <tuple>

#include "dockhand/protocol/envelope.h"
#include "dockhand/protocol/usage.h"

namespace dockhand::protocol {
namespace {

// A subtree (a payload, a result) as the envelope writes it.
void putJson(std::string& out, const Json& value) { out += encodeValue(value); }

// Printable ASCII but for the two characters JSON escapes goes out as it is. Anything else
// (control characters, UTF-8, invalid bytes) goes through the JSON library's own writer: its
// escaping and its replacement of invalid UTF-8 stay the one rule.
void putString(std::string& out, std::string_view text) {
  const bool plain = std::all_of(text.begin(), text.end(), [](char c) {
    return c >= 0x20 && c <= 0x7e && c != '"' && c != '\\';
  });
  if (!plain) {
    putJson(out, Json(text));
    return;
  }
  out += '"';
  out += text;
  out += '"';
}

template <class Int>
void putNumber(std::string& out, Int value) {
  std::array<char, 24> digits{};
  const auto written = std::to_chars(digits.data(), digits.data() + digits.size(), value);
  out.append(digits.data(), written.ptr);
}

// `"name":`, after a comma unless it is the object's first member.
void putKey(std::string& out, std::string_view name, bool& first) {
  if (!first) out += ',';
  first = false;
  putString(out, name);
  out += ':';
}

void putStringMap(std::string& out, const std::map<std::string, std::string>& map) {
  out += '{';
  bool first = true;
  for (const auto& [name, value] : map) {
    putKey(out, name, first);
    putString(out, value);
  }
  out += '}';
}

void putAddressMap(std::string& out, const std::map<std::string, std::vector<std::string>>& map) {
  out += '{';
  bool first = true;
  for (const auto& [name, addresses] : map) {
    putKey(out, name, first);
    out += '[';
    for (std::size_t i = 0; i < addresses.size(); ++i) {
      if (i > 0) out += ',';
      putString(out, addresses[i]);
    }
    out += ']';
  }
  out += '}';
}

// The task figures' names in the order a Json object prints them, "custom" among them (no
// member): sorted once from kTaskMetricFields, so a figure added there is written here too.
struct MetricSlot {
  std::string_view name;
  std::optional<std::uint64_t> TaskMetrics::*member = nullptr;
};
constexpr std::string_view kCustomMetrics = "custom";
constexpr std::size_t kMetricSlots = std::tuple_size_v<decltype(kTaskMetricFields)> + 1;

const std::array<MetricSlot, kMetricSlots>& sortedMetricSlots() {
  static const auto kSlots = [] {
    std::array<MetricSlot, kMetricSlots> all{};
    for (std::size_t i = 0; i < kTaskMetricFields.size(); ++i) {
      all[i] = {kTaskMetricFields[i].name, kTaskMetricFields[i].member};
    }
    all.back() = {kCustomMetrics, nullptr};
    std::sort(all.begin(), all.end(),
              [](const MetricSlot& a, const MetricSlot& b) { return a.name < b.name; });
    return all;
  }();
  return kSlots;
}

void putMetrics(std::string& out, const TaskMetrics& metrics) {
  out += '{';
  bool first = true;
  for (const MetricSlot& slot : sortedMetricSlots()) {
    if (slot.member == nullptr) {
      if (metrics.custom.empty()) continue;
      putKey(out, slot.name, first);
      putJson(out, Json(metrics.custom));
    } else if (const auto& value = metrics.*slot.member) {
      putKey(out, slot.name, first);
      putNumber(out, *value);
    }
  }
  out += '}';
}

void putTask(std::string& out, const TaskDescription& task) {
  // Sorted: attempt, cpus, inputs, name, partition, payload, properties, resources, runner,
  // task_id.
  out += "{\"attempt\":";
  putNumber(out, task.attempt);
  out += ",\"cpus\":";
  putNumber(out, task.cpus);
  if (!task.inputs.empty()) {
    out += ",\"inputs\":[";
    for (std::size_t i = 0; i < task.inputs.size(); ++i) {
      const InputBlock& block = task.inputs[i];
      if (i > 0) out += ',';
      out += "{\"checksum\":";
      putString(out, block.checksum);
      out += ",\"id\":";
      putString(out, block.id);
      out += ",\"size\":";
      putNumber(out, block.size);
      out += ",\"url\":";
      putString(out, block.url);
      out += '}';
    }
    out += ']';
  }
  out += ",\"name\":";
  putString(out, task.name);
  out += ",\"partition\":";
  putNumber(out, task.partition);
  out += ",\"payload\":";
  putJson(out, task.payload);
  if (!task.properties.empty()) {
    out += ",\"properties\":";
    putStringMap(out, task.properties);
  }
  if (!task.resources.empty()) {
    out += ",\"resources\":";
    putAddressMap(out, task.resources);
  }
  out += ",\"runner\":";
  putString(out, task.runner);
  out += ",\"task_id\":";
  putNumber(out, task.task_id);
  out += '}';
}

// The envelope around a body: {"body":...,"type":"..."} (no id: neither message is an ask).
std::string closeEnvelope(std::string out, MessageType type) {
  out += ",\"type\":";
  putString(out, specOf(type).name);
  out += '}';
  return out;
}

}  // namespace

std::string encodeLaunchTask(const LaunchTask& message) {
  std::string out;
  out.reserve(256);
  out += R"({"body":{"task":)";
  putTask(out, message.task);
  out += '}';
  return closeEnvelope(std::move(out), LaunchTask::kType);
}

std::string encodeStatusUpdate(const StatusUpdate& message) {
  std::string out;
  out.reserve(256);
  // Sorted: cpus, executor_id, exit_code, fetch_failed, log_urls, metrics, reason, resources,
  // result, signal, state, stderr_tail, task_id.
  out += R"({"body":{"cpus":)";
  putNumber(out, message.cpus);
  out += ",\"executor_id\":";
  putString(out, message.executor_id);
  if (message.exit_code) {
    out += ",\"exit_code\":";
    putNumber(out, *message.exit_code);
  }
  if (message.fetch_failed) {
    out += R"(,"fetch_failed":{"block_id":)";
    putString(out, message.fetch_failed->block_id);
    out += ",\"url\":";
    putString(out, message.fetch_failed->url);
    out += '}';
  }
  if (!message.log_urls.empty()) {
    out += ",\"log_urls\":";
    putStringMap(out, message.log_urls);
  }
  if (!message.metrics.empty()) {
    out += ",\"metrics\":";
    putMetrics(out, message.metrics);
  }
  if (!message.reason.empty()) {
    out += ",\"reason\":";
    putString(out, message.reason);
  }
  if (!message.resources.empty()) {
    out += ",\"resources\":";
    putAddressMap(out, message.resources);
  }
  if (!message.result.is_null()) {
    out += ",\"result\":";
    putJson(out, message.result);
  }
  if (message.signal) {
    out += ",\"signal\":";
    putNumber(out, *message.signal);
  }
  out += ",\"state\":";
  putString(out, toString(message.state));
  if (!message.stderr_tail.empty()) {
    out += ",\"stderr_tail\":";
    putString(out, message.stderr_tail);
  }
  out += ",\"task_id\":";
  putNumber(out, message.task_id);
  out += '}';
  return closeEnvelope(std::move(out), StatusUpdate::kType);
}

}  // namespace dockhand::protocol
