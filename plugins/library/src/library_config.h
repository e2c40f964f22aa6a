// The library runner's config and the task of one launch, parsed from JSON with errors that
// name the JSON path of the offending field. Plain data; no threads, no state.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dockhand::plugins::library {

struct LibraryConfig {
  std::map<std::string, std::string> libraries;     // name -> absolute path of a job library
  std::uint64_t max_direct_result_bytes = 1048576;  // Spark: spark.task.maxDirectResultSize
  std::uint64_t max_result_bytes = 1073741824;      // Spark: spark.driver.maxResultSize
  std::chrono::milliseconds kill_timeout{10000};    // Spark: spark.task.reaper.killTimeout
  bool exit_on_unkillable = false;                  // Spark: spark.task.reaper.enabled
  bool allow_insecure_libraries = false;
  // 0: tasks run on threads of the agent. N > 0: on N pre-started worker processes
  // (worker_pool.h), one task at a time each; a crash costs a worker, not the agent.
  std::uint32_t worker_processes = 0;
  std::string worker_program;  // the worker executable; "" = next to this plugin

  // How long shutting the runner down waits for its tasks to return after their kill, before
  // it gives them up: the kill timeout, but at most 2 s, so an agent's stop is not held up.
  std::chrono::milliseconds shutdownWait() const {
    return std::min<std::chrono::milliseconds>(kill_timeout, std::chrono::seconds(2));
  }
};

// Throws dockhand::sdk::Error(DH_INVALID_ARGUMENT) naming the key ("config/libraries/x: ...").
LibraryConfig parseConfig(std::string_view config_json);

// The JSON Schema of what parseConfig accepts, checked by the host before create(). The rule
// it cannot say (max_result_bytes >= max_direct_result_bytes) is parseConfig's.
inline constexpr const char* kLibraryConfigSchema = R"({
  "type": "object",
  "properties": {
    "libraries": {
      "type": "object",
      "additionalProperties": {"type": "string", "minLength": 1}
    },
    "max_direct_result_bytes": {"type": "integer", "minimum": 0, "maximum": 4611686018427387904},
    "max_result_bytes": {"type": "integer", "minimum": 0, "maximum": 4611686018427387904},
    "kill_timeout_ms": {"type": "integer", "minimum": 0, "maximum": 86400000},
    "exit_on_unkillable": {"type": "boolean"},
    "allow_insecure_libraries": {"type": "boolean"},
    "worker_processes": {"type": "integer", "minimum": 0, "maximum": 1024},
    "worker_program": {"type": "string", "pattern": "^/"}
  },
  "additionalProperties": false
})";

// What launch() needs from task_json and its payload.
struct TaskSpec {
  std::uint64_t task_id = 0;
  std::uint32_t attempt = 0;
  std::int64_t partition = 0;
  std::string work_dir;  // absolute
  std::string library;   // as the payload names it: a configured name or a path
  std::string function;
  std::string args = "null";        // JSON text
  std::vector<std::string> inputs;  // block ids, in the task's order
};

// Throws dockhand::sdk::Error(DH_INVALID_ARGUMENT) naming the field ("payload/function: ...").
// Reads the common, well-formed task_json with parseTaskFast, anything else as a JSON tree.
TaskSpec parseTask(std::string_view task_json);
// task_sax.cpp: `task_json` read without a tree, or nullopt for anything parseTask's tree path
// would refuse or read differently (then it decides, with its message).
std::optional<TaskSpec> parseTaskFast(std::string_view task_json);
// parseTask's tree path alone (its fallback; tests hold parseTaskFast to it).
TaskSpec parseTaskTree(std::string_view task_json);

// Whether `id` can name a file in a task's directory: [A-Za-z0-9_.-]+, not "." or "..", at
// most 255 bytes.
bool isSafeFileName(std::string_view id);

}  // namespace dockhand::plugins::library
