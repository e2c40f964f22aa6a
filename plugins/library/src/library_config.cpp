#include "library_config.h"

#include <limits>

#include <nlohmann/json.hpp>

#include "dockhand/plugin.hpp"
#include "task_json.h"

namespace dockhand::plugins::library {
namespace {

using nlohmann::json;

bool boolean(const json& value, const std::string& path) {
  if (!value.is_boolean()) invalidArgument(path, "must be true or false");
  return value.get<bool>();
}

}  // namespace

bool isSafeFileName(std::string_view id) {
  if (id.empty() || id.size() > 255 || id == "." || id == "..") return false;
  for (char c : id) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '.' || c == '-';
    if (!ok) return false;
  }
  return true;
}

LibraryConfig parseConfig(std::string_view config_json) {
  json config = parseJsonObject(config_json, "config");
  LibraryConfig out;
  constexpr std::uint64_t kMaxBytes = std::uint64_t{1} << 62;
  for (const auto& [key, value] : config.items()) {
    const std::string path = "config/" + key;
    if (key == "libraries") {
      if (!value.is_object()) invalidArgument(path, "must be an object of name -> absolute path");
      for (const auto& [name, file] : value.items()) {
        std::string item = path;
        item += '/';
        item += name;
        if (!isSafeFileName(name)) invalidArgument(item, "a library name is [A-Za-z0-9_.-]+");
        if (!file.is_string() || file.get_ref<const std::string&>().empty() ||
            file.get_ref<const std::string&>().front() != '/') {
          invalidArgument(item, "must be the absolute path of a job library (.so)");
        }
        out.libraries.emplace(name, file.get<std::string>());
      }
    } else if (key == "max_direct_result_bytes") {
      out.max_direct_result_bytes = nonNegativeInteger(value, path, kMaxBytes);
    } else if (key == "max_result_bytes") {
      out.max_result_bytes = nonNegativeInteger(value, path, kMaxBytes);
    } else if (key == "kill_timeout_ms") {
      out.kill_timeout = std::chrono::milliseconds(nonNegativeInteger(value, path, 86400000));
    } else if (key == "exit_on_unkillable") {
      out.exit_on_unkillable = boolean(value, path);
    } else if (key == "allow_insecure_libraries") {
      out.allow_insecure_libraries = boolean(value, path);
    } else if (key == "worker_processes") {
      out.worker_processes = static_cast<std::uint32_t>(nonNegativeInteger(value, path, 1024));
    } else if (key == "worker_program") {
      if (!value.is_string() || value.get_ref<const std::string&>().empty() ||
          value.get_ref<const std::string&>().front() != '/') {
        invalidArgument(path, "must be the absolute path of the worker executable");
      }
      out.worker_program = value.get<std::string>();
    } else {
      invalidArgument(
          path,
          "unknown key (known keys: libraries, max_direct_result_bytes, max_result_bytes, "
          "kill_timeout_ms, exit_on_unkillable, allow_insecure_libraries, worker_processes, "
          "worker_program)");
    }
  }
  if (out.max_result_bytes < out.max_direct_result_bytes) {
    invalidArgument("config/max_result_bytes", "must be at least config/max_direct_result_bytes (" +
                                                   std::to_string(out.max_direct_result_bytes) +
                                                   ")");
  }
  return out;
}

TaskSpec parseTask(std::string_view task_json) {
  if (auto fast = parseTaskFast(task_json)) return std::move(*fast);
  return parseTaskTree(task_json);
}

TaskSpec parseTaskTree(std::string_view task_json) {
  json task = parseJsonObject(task_json, "task_json");
  TaskSpec spec;
  plugins::TaskBasics basics = plugins::readTaskBasics(task);
  spec.task_id = basics.task_id;
  spec.work_dir = std::move(basics.work_dir);
  if (auto attempt = task.find("attempt"); attempt != task.end() && !attempt->is_null()) {
    spec.attempt = static_cast<std::uint32_t>(
        nonNegativeInteger(*attempt, "attempt", std::numeric_limits<std::uint32_t>::max()));
  }
  if (auto partition = task.find("partition"); partition != task.end() && !partition->is_null()) {
    if (!partition->is_number_integer()) invalidArgument("partition", "must be an integer");
    spec.partition = partition->get<std::int64_t>();
  }
  if (auto inputs = task.find("inputs"); inputs != task.end() && !inputs->is_null()) {
    if (!inputs->is_array()) invalidArgument("inputs", "must be an array of block ids");
    for (const auto& input : *inputs) {
      if (!input.is_string() || !isSafeFileName(input.get_ref<const std::string&>())) {
        invalidArgument("inputs", "must be an array of block ids");
      }
      spec.inputs.push_back(input.get<std::string>());
    }
  }

  auto payload_it = task.find("payload");
  if (payload_it == task.end() || !payload_it->is_object()) {
    invalidArgument("payload",
                    R"(must be an object {"library": ..., "function": ..., "args": ...})");
  }
  const json& payload = *payload_it;
  for (const auto& [key, value] : payload.items()) {
    if (key != "library" && key != "function" && key != "args") {
      invalidArgument("payload/" + key, "unknown key (known keys: library, function, args)");
    }
  }
  auto library = payload.find("library");
  if (library == payload.end() || !library->is_string() ||
      library->get_ref<const std::string&>().empty()) {
    invalidArgument("payload/library",
                    "missing: name a job library of config/libraries, or give its absolute path");
  }
  spec.library = library->get<std::string>();
  auto function = payload.find("function");
  if (function == payload.end() || !function->is_string() ||
      function->get_ref<const std::string&>().empty()) {
    invalidArgument("payload/function",
                    "missing: name a task function of library '" + spec.library + "'");
  }
  spec.function = function->get<std::string>();
  if (auto args = payload.find("args"); args != payload.end()) spec.args = args->dump();
  return spec;
}

}  // namespace dockhand::plugins::library
