#include "process_config.h"

#include <limits>
#include <string_view>

#include "dockhand/plugin.hpp"

namespace dockhand::plugins::process {
namespace {

using nlohmann::json;

[[noreturn]] void invalid(const std::string& path, const std::string& what) {
  throw sdk::Error(DH_INVALID_ARGUMENT, path + ": " + what);
}

json parseObject(std::string_view text, const std::string& what) {
  json value = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded()) invalid(what, "is not valid JSON");
  if (!value.is_object()) invalid(what, "must be a JSON object");
  return value;
}

std::uint64_t nonNegative(const json& value, const std::string& path, std::uint64_t max) {
  if (!value.is_number_integer() ||
      (value.is_number_integer() && !value.is_number_unsigned() && value.get<std::int64_t>() < 0)) {
    invalid(path, "must be a non-negative integer");
  }
  auto n = value.get<std::uint64_t>();
  if (n > max) invalid(path, "must be at most " + std::to_string(max));
  return n;
}

void readEnv(const json& object, const std::string& path,
             std::vector<std::pair<std::string, std::string>>& env) {
  if (!object.is_object()) invalid(path, "must be an object of strings");
  for (const auto& [key, value] : object.items()) {
    if (key.empty() || key.find('=') != std::string::npos) {
      invalid(path + "/" + key, "is not a valid environment variable name");
    }
    if (!value.is_string()) invalid(path + "/" + key, "must be a string");
    env.emplace_back(key, value.get<std::string>());
  }
}

}  // namespace

ProcessConfig parseConfig(std::string_view config_json) {
  ProcessConfig config;
  json object = parseObject(config_json.empty() ? std::string_view("{}") : config_json, "config");
  constexpr std::uint64_t kMaxBytes = 1ull << 30;
  for (const auto& [key, value] : object.items()) {
    const std::string path = "config/" + key;
    if (key == "kill_grace_ms") {
      config.kill_grace = std::chrono::milliseconds(nonNegative(value, path, 24ull * 3600 * 1000));
    } else if (key == "result_limit_bytes") {
      config.result_limit_bytes = nonNegative(value, path, kMaxBytes);
    } else if (key == "stderr_tail_bytes") {
      config.stderr_tail_bytes = nonNegative(value, path, kMaxBytes);
    } else {
      invalid(path,
              "unknown key (known keys: kill_grace_ms, result_limit_bytes, stderr_tail_bytes)");
    }
  }
  return config;
}

TaskSpec parseTask(std::string_view task_json) {
  json task = parseObject(task_json, "task_json");
  TaskSpec spec;

  auto id = task.find("task_id");
  if (id == task.end() || !id->is_number_unsigned()) {
    invalid("task_id", "must be a non-negative integer");
  }
  spec.task_id = id->get<std::uint64_t>();

  auto work_dir = task.find("work_dir");
  if (work_dir == task.end() || !work_dir->is_string() ||
      work_dir->get_ref<const std::string&>().empty() ||
      work_dir->get_ref<const std::string&>().front() != '/') {
    invalid("work_dir", "must be an absolute path");
  }
  spec.work_dir = work_dir->get<std::string>();

  if (auto env = task.find("env"); env != task.end() && !env->is_null()) {
    readEnv(*env, "env", spec.env);
  }

  auto payload_it = task.find("payload");
  if (payload_it == task.end() || !payload_it->is_object()) {
    invalid("payload", "must be an object with \"command\" or \"shell\"");
  }
  const json& payload = *payload_it;
  for (const auto& [key, value] : payload.items()) {
    if (key != "command" && key != "shell" && key != "env" && key != "cwd") {
      invalid("payload/" + key, "unknown key (known keys: command, shell, env, cwd)");
    }
  }
  auto command = payload.find("command");
  auto shell = payload.find("shell");
  if ((command == payload.end()) == (shell == payload.end())) {
    invalid("payload", "needs exactly one of \"command\" or \"shell\"");
  }
  if (command != payload.end()) {
    if (!command->is_array() || command->empty()) {
      invalid("payload/command", "must be a non-empty array of strings");
    }
    for (const auto& arg : *command) {
      if (!arg.is_string()) invalid("payload/command", "must be a non-empty array of strings");
      spec.argv.push_back(arg.get<std::string>());
    }
    if (spec.argv.front().empty()) invalid("payload/command/0", "must not be empty");
    spec.search_path = spec.argv.front().find('/') == std::string::npos;
  } else {
    if (!shell->is_string() || shell->get_ref<const std::string&>().empty()) {
      invalid("payload/shell", "must be a non-empty string");
    }
    spec.argv = {"/bin/sh", "-c", shell->get<std::string>()};
  }
  for (const auto& arg : spec.argv) {
    if (arg.find('\0') != std::string::npos) invalid("payload", "arguments must not contain NUL");
  }

  if (auto env = payload.find("env"); env != payload.end()) {
    readEnv(*env, "payload/env", spec.env);
  }

  spec.cwd = spec.work_dir;
  if (auto cwd = payload.find("cwd"); cwd != payload.end()) {
    if (!cwd->is_string()) invalid("payload/cwd", "must be a string");
    const auto& rel = cwd->get_ref<const std::string&>();
    if (!rel.empty() && rel.front() == '/') {
      invalid("payload/cwd", "must be relative to the task's work_dir");
    }
    if (!rel.empty()) spec.cwd = spec.work_dir + "/" + rel;
  }
  return spec;
}

}  // namespace dockhand::plugins::process
