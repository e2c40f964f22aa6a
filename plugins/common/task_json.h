// What the built-in task runners (process, library) read alike from the host: the task JSON
// the host builds for launch() (task_id, work_dir, attempt, payload...) and their config,
// checked the same way, with the same error text: "<path>: <what is wrong>", thrown as
// sdk::Error(DH_INVALID_ARGUMENT), which the plugin ABI turns into the refusal the agent logs.
//
// Header-only (target dockhand_plugin_json): each plugin compiles its own copy and keeps its
// symbols inside.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "dockhand/plugin.hpp"

namespace dockhand::plugins {

[[noreturn]] inline void invalidArgument(const std::string& path, const std::string& what) {
  throw sdk::Error(DH_INVALID_ARGUMENT, path + ": " + what);
}

// `text` parsed, which must be a JSON object; `what` names it in the error.
inline nlohmann::json parseJsonObject(std::string_view text, const std::string& what) {
  nlohmann::json value =
      nlohmann::json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded()) invalidArgument(what, "is not valid JSON");
  if (!value.is_object()) invalidArgument(what, "must be a JSON object");
  return value;
}

inline std::uint64_t nonNegativeInteger(const nlohmann::json& value, const std::string& path,
                                        std::uint64_t max) {
  if (!value.is_number_integer() ||
      (!value.is_number_unsigned() && value.get<std::int64_t>() < 0)) {
    invalidArgument(path, "must be a non-negative integer");
  }
  const auto n = value.get<std::uint64_t>();
  if (n > max) invalidArgument(path, "must be at most " + std::to_string(max));
  return n;
}

// The members every launch carries.
struct TaskBasics {
  std::uint64_t task_id = 0;
  std::string work_dir;  // absolute
};

// A launch's work_dir: an absolute path.
inline bool isTaskWorkDir(std::string_view dir) { return !dir.empty() && dir.front() == '/'; }

inline TaskBasics readTaskBasics(const nlohmann::json& task) {
  TaskBasics basics;
  auto id = task.find("task_id");
  if (id == task.end() || !id->is_number_unsigned()) {
    invalidArgument("task_id", "must be a non-negative integer");
  }
  basics.task_id = id->get<std::uint64_t>();
  auto work_dir = task.find("work_dir");
  if (work_dir == task.end() || !work_dir->is_string() ||
      !isTaskWorkDir(work_dir->get_ref<const std::string&>())) {
    invalidArgument("work_dir", "must be an absolute path");
  }
  basics.work_dir = work_dir->get<std::string>();
  return basics;
}

}  // namespace dockhand::plugins
