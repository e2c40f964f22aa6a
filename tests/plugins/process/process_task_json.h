// The task_json the agent gives the process runner (plugin.h, launch), for the runner's tests:
// task `id` with `payload`, in a work directory of its own under `root` (made here).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

namespace dockhand::agent {

inline std::string processTaskJson(const std::filesystem::path& root, std::uint64_t id,
                                   nlohmann::json payload,
                                   nlohmann::json env = nlohmann::json::object()) {
  const auto dir = root / ("task-" + std::to_string(id));
  std::filesystem::create_directories(dir);
  return nlohmann::json{{"task_id", id},
                        {"attempt", 0},
                        {"name", "t"},
                        {"partition", 0},
                        {"cpus", 1},
                        {"resources", nlohmann::json::object()},
                        {"properties", nlohmann::json::object()},
                        {"payload", std::move(payload)},
                        {"work_dir", dir.string()},
                        {"env", std::move(env)}}
      .dump();
}

}  // namespace dockhand::agent
