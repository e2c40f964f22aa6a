#include "dockhand/driver/results_dir.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <system_error>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "dockhand/driver/report.h"
#include "dockhand/protocol/result_value.h"

namespace dockhand::driver {
namespace {

namespace fs = std::filesystem;

Result<void> writeFile(const fs::path& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) return Error(fmt::format("cannot write {}: {}", path.string(), std::strerror(errno)));
  return {};
}

}  // namespace

std::string resultFileName(std::string_view task_name) {
  std::string name;
  name.reserve(task_name.size());
  for (const char c : task_name) {
    const bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                       c == '.' || c == '_' || c == '-';
    name += plain ? c : '_';
  }
  if (name.empty() || name == "." || name == "..") return "_";
  return name;
}

Result<std::size_t> writeResultsDir(const std::string& dir, const std::vector<TaskRecord>& tasks) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return Error(fmt::format("cannot create {}: {}", dir, ec.message()));
  std::set<std::string> taken{"results.json"};
  std::size_t written = 0;
  nlohmann::json index = nlohmann::json::array();
  for (const TaskRecord& task : tasks) {
    nlohmann::json entry = {{"name", task.spec.name},
                            {"outcome", toString(task.outcome)},
                            {"agent", task.agent_id},
                            {"attempts", task.launches},
                            {"duration_ms", task.duration.count()}};
    if (!task.metrics.empty()) entry["metrics"] = protocol::toJson(task.metrics);
    if (task.outcome == TaskOutcome::kFinished) {
      // A built-in runner's value, or another runner's result as its text.
      const auto other = otherResultText(task.result);
      auto bytes = other ? Result<std::string>(*other) : protocol::resultBytes(task.result);
      if (bytes) {
        std::string file = resultFileName(task.spec.name);
        for (int n = 2; !taken.insert(file).second; ++n) {
          file = fmt::format("{}~{}", resultFileName(task.spec.name), n);
        }
        if (auto ok = writeFile(fs::path(dir) / file, *bytes); !ok) return ok.error();
        entry["file"] = file;
        entry["bytes"] = bytes->size();
        ++written;
      } else {
        entry["reason"] = bytes.error().message;
      }
    } else if (!task.reason.empty()) {
      entry["reason"] = task.reason;
    }
    index.push_back(std::move(entry));
  }
  const std::string text =
      index.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  if (auto ok = writeFile(fs::path(dir) / "results.json", text); !ok) return ok.error();
  return written;
}

}  // namespace dockhand::driver
