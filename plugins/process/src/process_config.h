// The process runner's config and the payload of one task, parsed from JSON with errors that
// name the JSON path of the offending field.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace dockhand::plugins::process {

struct ProcessConfig {
  std::chrono::milliseconds kill_grace{5000};  // SIGTERM -> SIGKILL delay on a graceful kill
  std::size_t result_limit_bytes = 65536;      // stdout bytes returned as the result
  std::size_t stderr_tail_bytes = 4096;        // stderr bytes returned on failure
};

// Throws dockhand::sdk::Error(DH_INVALID_ARGUMENT) naming the key ("config/kill_grace_ms: ...").
ProcessConfig parseConfig(std::string_view config_json);

// What launch() needs from task_json and its payload.
struct TaskSpec {
  std::uint64_t task_id = 0;
  std::string work_dir;
  std::string cwd;                                       // absolute
  std::vector<std::string> argv;                         // argv[0] is the program
  bool search_path = false;                              // argv[0] has no '/'
  std::vector<std::pair<std::string, std::string>> env;  // task env, then payload env
};

// Throws dockhand::sdk::Error(DH_INVALID_ARGUMENT) naming the field ("payload/command: ...").
TaskSpec parseTask(std::string_view task_json);

}  // namespace dockhand::plugins::process
