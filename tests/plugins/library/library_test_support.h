// Shared by the library runner's tests: job libraries copied where the runner trusts them
// (a private temporary directory, mode 0755), and task_json for a payload.
#pragma once

#include <sys/stat.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "test_processes.h"

namespace dockhand::testing {

// Copies the job library at `from` to `dir`/`name`, mode `mode`; returns the copy's path.
inline std::string installJobLibrary(const std::filesystem::path& dir, const std::string& from,
                                     const std::string& name, mode_t mode = 0755) {
  std::filesystem::path to = dir / name;
  std::filesystem::copy_file(from, to, std::filesystem::copy_options::overwrite_existing);
  ::chmod(to.c_str(), mode);
  return to.string();
}

// A task_json for `payload`, with its own work directory under `root`.
inline std::string libraryTask(const std::filesystem::path& root, std::uint64_t id,
                               nlohmann::json payload, std::vector<std::string> inputs = {}) {
  auto dir = root / ("task-" + std::to_string(id));
  std::filesystem::create_directories(dir);
  return nlohmann::json{{"task_id", id},
                        {"attempt", 2},
                        {"name", "t"},
                        {"partition", 5},
                        {"cpus", 1},
                        {"resources", nlohmann::json::object()},
                        {"properties", nlohmann::json::object()},
                        {"payload", std::move(payload)},
                        {"work_dir", dir.string()},
                        {"env", nlohmann::json::object()},
                        {"inputs", inputs}}
      .dump();
}

inline std::filesystem::path taskDir(const std::filesystem::path& root, std::uint64_t id) {
  return root / ("task-" + std::to_string(id));
}

}  // namespace dockhand::testing
