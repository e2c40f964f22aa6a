#include "dockhand/protocol/decommission_progress.h"

namespace dockhand::protocol {

using nlohmann::json;

json toJson(const std::optional<DecommissionProgress>& progress) {
  if (!progress) return nullptr;
  const DecommissionProgress& p = *progress;
  auto known = [](const std::optional<std::uint64_t>& v) { return v ? json(*v) : json(nullptr); };
  return json{{"state", p.state},
              {"running_tasks", p.running_tasks},
              {"bytes_per_s", known(p.bytes_per_s)},
              {"eta_ms", known(p.eta_ms)},
              {"blocks_total", p.blocksTotal()},
              {"blocks_migrated", p.blocks_migrated},
              {"blocks_failed", p.blocks_failed},
              {"blocks_left", p.blocks_left},
              {"bytes_total", p.bytesTotal()},
              {"bytes_migrated", p.bytes_migrated},
              {"bytes_left", p.bytes_left},
              {"passes", p.passes}};
}

std::optional<DecommissionProgress> readDecommissionProgress(const json& report) {
  if (!report.is_object()) return std::nullopt;
  auto number = [&](const char* key) -> std::optional<std::uint64_t> {
    auto it = report.find(key);
    if (it == report.end() || !it->is_number_integer() || it->get<std::int64_t>() < 0) {
      return std::nullopt;
    }
    return it->get<std::uint64_t>();
  };
  DecommissionProgress p;
  if (auto it = report.find("state"); it != report.end() && it->is_string()) {
    p.state = it->get<std::string>();
  }
  p.running_tasks = number("running_tasks").value_or(0);
  p.blocks_migrated = number("blocks_migrated").value_or(0);
  p.blocks_failed = number("blocks_failed").value_or(0);
  p.blocks_left = number("blocks_left").value_or(0);
  p.bytes_migrated = number("bytes_migrated").value_or(0);
  p.bytes_left = number("bytes_left").value_or(0);
  p.passes = number("passes").value_or(0);
  p.bytes_per_s = number("bytes_per_s");
  p.eta_ms = number("eta_ms");
  return p;
}

}  // namespace dockhand::protocol
