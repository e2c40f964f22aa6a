#include "process_config.h"

#include <grp.h>
#include <pwd.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <limits>
#include <string_view>

#include "dockhand/plugin.hpp"
#include "task_json.h"

namespace dockhand::plugins::process {
namespace {

using nlohmann::json;

// The JSON path of `key` (a member name or an index) under `path`.
std::string childPath(const std::string& path, const std::string& key) { return path + "/" + key; }

void readEnv(const json& object, const std::string& path,
             std::vector<std::pair<std::string, std::string>>& env) {
  if (!object.is_object()) invalidArgument(path, "must be an object of strings");
  for (const auto& [key, value] : object.items()) {
    if (key.empty() || key.find('=') != std::string::npos) {
      invalidArgument(childPath(path, key), "is not a valid environment variable name");
    }
    if (!value.is_string()) invalidArgument(childPath(path, key), "must be a string");
    env.emplace_back(key, value.get<std::string>());
  }
}

bool isVariableName(const std::string& name) {
  if (name.empty() || std::isdigit(static_cast<unsigned char>(name.front()))) return false;
  for (unsigned char c : name) {
    if (!std::isalnum(c) && c != '_') return false;
  }
  return true;
}

// A user or group as configured: a name, or a decimal id.
std::string nameOrId(const json& value, const std::string& path) {
  if (value.is_number_unsigned()) return std::to_string(value.get<std::uint64_t>());
  if (!value.is_string() || value.get_ref<const std::string&>().empty()) {
    invalidArgument(path, "must be a name or a non-negative integer id");
  }
  return value.get<std::string>();
}

std::optional<std::uint32_t> numericId(const std::string& text) {
  if (text.empty() || text.size() > 10) return std::nullopt;
  std::uint64_t n = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    n = n * 10 + static_cast<std::uint64_t>(c - '0');
  }
  // (uid_t)-1 means "unchanged" to the set*id calls: not a usable id.
  if (n >= std::numeric_limits<std::uint32_t>::max()) return std::nullopt;
  return static_cast<std::uint32_t>(n);
}

ResourceLimits parseLimits(const json& object, const std::string& path) {
  if (!object.is_object()) invalidArgument(path, "must be an object");
  ResourceLimits limits;
  constexpr std::uint64_t kMax = std::numeric_limits<std::int64_t>::max();
  for (const auto& [key, value] : object.items()) {
    const std::string item = childPath(path, key);
    if (key == "open_files") {
      limits.open_files = nonNegativeInteger(value, item, 1ull << 30);
      if (*limits.open_files == 0) invalidArgument(item, "must be at least 1");
    } else if (key == "processes") {
      limits.processes = nonNegativeInteger(value, item, kMax);
      if (*limits.processes == 0) invalidArgument(item, "must be at least 1");
    } else if (key == "address_space_bytes") {
      limits.address_space_bytes = nonNegativeInteger(value, item, kMax);
      if (*limits.address_space_bytes < (16ull << 20)) {
        invalidArgument(item, "must be at least 16777216 (16 MiB): no program starts with less");
      }
    } else if (key == "core_bytes") {
      limits.core_bytes = nonNegativeInteger(value, item, kMax);
    } else {
      invalidArgument(
          item, "unknown key (known keys: open_files, processes, address_space_bytes, core_bytes)");
    }
  }
  return limits;
}

// Runs getpwnam_r-style lookups with a buffer that grows on ERANGE.
template <typename Entry, typename Lookup>
bool lookUp(Lookup lookup, Entry& entry, std::vector<char>& buffer, int& error) {
  buffer.resize(1024);
  for (;;) {
    Entry* found = nullptr;
    error = lookup(&entry, buffer.data(), buffer.size(), &found);
    if (error == ERANGE && buffer.size() < (1u << 20)) {
      buffer.resize(buffer.size() * 2);
      continue;
    }
    return error == 0 && found != nullptr;
  }
}

std::string lookupFailure(const std::string& path, const std::string& what, const std::string& name,
                          int error) {
  if (error == 0 || error == ENOENT || error == ESRCH || error == EBADF || error == EPERM) {
    return path + ": no " + what + " '" + name + "' on this machine";
  }
  return path + ": cannot look up " + what + " '" + name + "': " + std::strerror(error);
}

}  // namespace

bool isAgentPrivateVariable(std::string_view name) {
  return name.starts_with("DOCKHAND_") || name == "NOTIFY_SOCKET" ||
         name == "CREDENTIALS_DIRECTORY" || name == "WATCHDOG_USEC" || name == "WATCHDOG_PID";
}

ProcessConfig parseConfig(std::string_view config_json) {
  ProcessConfig config;
  json object =
      parseJsonObject(config_json.empty() ? std::string_view("{}") : config_json, "config");
  constexpr std::uint64_t kMaxBytes = 1ull << 30;
  std::optional<bool> inherit_env;
  bool has_env_allow = false;
  for (const auto& [key, value] : object.items()) {
    const std::string path = "config/" + key;
    if (key == "kill_grace_ms") {
      config.kill_grace =
          std::chrono::milliseconds(nonNegativeInteger(value, path, 24ull * 3600 * 1000));
    } else if (key == "result_limit_bytes") {
      config.result_limit_bytes = nonNegativeInteger(value, path, kMaxBytes);
    } else if (key == "stderr_tail_bytes") {
      config.stderr_tail_bytes = nonNegativeInteger(value, path, kMaxBytes);
    } else if (key == "user") {
      config.user = nameOrId(value, path);
    } else if (key == "group") {
      config.group = nameOrId(value, path);
    } else if (key == "inherit_env") {
      if (!value.is_boolean()) invalidArgument(path, "must be true or false");
      inherit_env = value.get<bool>();
    } else if (key == "env_allow") {
      if (!value.is_array()) invalidArgument(path, "must be an array of variable names");
      has_env_allow = true;
      for (std::size_t i = 0; i < value.size(); ++i) {
        const std::string item = childPath(path, std::to_string(i));
        if (!value[i].is_string() || !isVariableName(value[i].get<std::string>())) {
          invalidArgument(
              item, "must be a variable name (letters, digits and _, not starting with a digit)");
        }
        std::string name = value[i].get<std::string>();
        if (isAgentPrivateVariable(name)) {
          invalidArgument(item, "'" + name + "' is the agent's own and is never passed to tasks");
        }
        config.env_allow.push_back(std::move(name));
      }
    } else if (key == "limits") {
      config.limits = parseLimits(value, path);
    } else {
      invalidArgument(
          path,
          "unknown key (known keys: kill_grace_ms, result_limit_bytes, stderr_tail_bytes, "
          "user, group, inherit_env, env_allow, limits)");
    }
  }
  if (!config.group.empty() && config.user.empty()) {
    invalidArgument("config/group",
                    "needs config/user (tasks run as the agent's own user and group)");
  }
  config.inherit_env = inherit_env.value_or(config.user.empty());
  if (has_env_allow && config.inherit_env) {
    invalidArgument(
        "config/env_allow",
        "only applies when the environment is not inherited (set inherit_env to false)");
  }
  return config;
}

std::optional<TaskIdentity> resolveIdentity(const ProcessConfig& config, uid_t euid, gid_t egid) {
  if (config.user.empty()) return std::nullopt;
  TaskIdentity identity;
  std::vector<char> buffer;
  int error = 0;
  passwd pw{};
  bool have_gid = false;
  if (auto id = numericId(config.user)) {
    identity.uid = *id;
    identity.name = config.user;
    identity.home = "/";
    if (lookUp([&](passwd* entry, char* buf, std::size_t size,
                   passwd** found) { return ::getpwuid_r(*id, entry, buf, size, found); },
               pw, buffer, error)) {
      identity.name = pw.pw_name;
      identity.home = pw.pw_dir && *pw.pw_dir ? pw.pw_dir : "/";
      identity.gid = pw.pw_gid;
      have_gid = true;
    }
  } else {
    if (!lookUp(
            [&](passwd* entry, char* buf, std::size_t size, passwd** found) {
              return ::getpwnam_r(config.user.c_str(), entry, buf, size, found);
            },
            pw, buffer, error)) {
      throw sdk::Error(DH_INVALID_ARGUMENT,
                       lookupFailure("config/user", "user", config.user, error));
    }
    identity.uid = pw.pw_uid;
    identity.name = pw.pw_name;
    identity.home = pw.pw_dir && *pw.pw_dir ? pw.pw_dir : "/";
    identity.gid = pw.pw_gid;
    have_gid = true;
  }
  if (!config.group.empty()) {
    if (auto id = numericId(config.group)) {
      identity.gid = *id;
    } else {
      group gr{};
      if (!lookUp(
              [&](group* entry, char* buf, std::size_t size, group** found) {
                return ::getgrnam_r(config.group.c_str(), entry, buf, size, found);
              },
              gr, buffer, error)) {
        throw sdk::Error(DH_INVALID_ARGUMENT,
                         lookupFailure("config/group", "group", config.group, error));
      }
      identity.gid = gr.gr_gid;
    }
    have_gid = true;
  }
  if (!have_gid) {
    invalidArgument("config/group", "is needed: user " + config.user +
                                        " has no passwd entry, so it has no primary group to use");
  }
  identity.switches = identity.uid != euid || identity.gid != egid;
  if (identity.switches && euid != 0) {
    invalidArgument("config/user",
                    "running tasks as user '" + identity.name + "' (uid " +
                        std::to_string(identity.uid) + ", gid " + std::to_string(identity.gid) +
                        ") needs the agent to run as root; it runs as uid " + std::to_string(euid) +
                        ", gid " + std::to_string(egid) +
                        " (leave user and group out to run tasks as " + "the agent's own user)");
  }
  return identity;
}

TaskSpec parseTask(std::string_view task_json) {
  json task = parseJsonObject(task_json, "task_json");
  TaskSpec spec;
  plugins::TaskBasics basics = plugins::readTaskBasics(task);
  spec.task_id = basics.task_id;
  spec.work_dir = std::move(basics.work_dir);

  if (auto env = task.find("env"); env != task.end() && !env->is_null()) {
    readEnv(*env, "env", spec.env);
  }

  auto payload_it = task.find("payload");
  if (payload_it == task.end() || !payload_it->is_object()) {
    invalidArgument("payload", R"(must be an object with "command" or "shell")");
  }
  const json& payload = *payload_it;
  for (const auto& [key, value] : payload.items()) {
    if (key != "command" && key != "shell" && key != "env" && key != "cwd") {
      invalidArgument("payload/" + key, "unknown key (known keys: command, shell, env, cwd)");
    }
  }
  auto command = payload.find("command");
  auto shell = payload.find("shell");
  if ((command == payload.end()) == (shell == payload.end())) {
    invalidArgument("payload", R"(needs exactly one of "command" or "shell")");
  }
  if (command != payload.end()) {
    if (!command->is_array() || command->empty()) {
      invalidArgument("payload/command", "must be a non-empty array of strings");
    }
    for (const auto& arg : *command) {
      if (!arg.is_string())
        invalidArgument("payload/command", "must be a non-empty array of strings");
      spec.argv.push_back(arg.get<std::string>());
    }
    if (spec.argv.front().empty()) invalidArgument("payload/command/0", "must not be empty");
    spec.search_path = spec.argv.front().find('/') == std::string::npos;
  } else {
    if (!shell->is_string() || shell->get_ref<const std::string&>().empty()) {
      invalidArgument("payload/shell", "must be a non-empty string");
    }
    spec.argv = {"/bin/sh", "-c", shell->get<std::string>()};
  }
  for (const auto& arg : spec.argv) {
    if (arg.find('\0') != std::string::npos)
      invalidArgument("payload", "arguments must not contain NUL");
  }

  if (auto env = payload.find("env"); env != payload.end()) {
    readEnv(*env, "payload/env", spec.env);
  }

  spec.cwd = spec.work_dir;
  if (auto cwd = payload.find("cwd"); cwd != payload.end()) {
    if (!cwd->is_string()) invalidArgument("payload/cwd", "must be a string");
    const auto& rel = cwd->get_ref<const std::string&>();
    if (!rel.empty() && rel.front() == '/') {
      invalidArgument("payload/cwd", "must be relative to the task's work_dir");
    }
    if (!rel.empty()) spec.cwd = spec.work_dir + "/" + rel;
  }
  return spec;
}

}  // namespace dockhand::plugins::process
