#include "task_environment.h"

#include <pwd.h>

#include <cstdlib>
#include <string_view>
#include <unordered_map>

extern char** environ;

namespace dockhand::plugins::process {

EnvironmentOwner agentEnvironmentOwner(uid_t euid) {
  EnvironmentOwner owner{std::to_string(euid), "/"};
  std::vector<char> buffer(4096);
  passwd pw{};
  passwd* found = nullptr;
  if (::getpwuid_r(euid, &pw, buffer.data(), buffer.size(), &found) == 0 && found) {
    owner.user = pw.pw_name;
    if (pw.pw_dir && *pw.pw_dir) owner.home = pw.pw_dir;
  }
  return owner;
}

std::vector<std::string> buildEnvironment(
    const ProcessConfig& config, const std::string& user, const std::string& home,
    const std::vector<std::pair<std::string, std::string>>& overrides) {
  std::unordered_map<std::string, std::string> vars;
  if (config.inherit_env) {
    for (char** entry = environ; entry && *entry; ++entry) {
      std::string_view item(*entry);
      auto eq = item.find('=');
      if (eq == std::string_view::npos || isAgentPrivateVariable(item.substr(0, eq))) continue;
      vars.insert_or_assign(std::string(item.substr(0, eq)), std::string(item.substr(eq + 1)));
    }
  } else {
    const char* lang = ::getenv("LANG");
    vars = {{"PATH", kDefaultPath},
            {"HOME", home},
            {"USER", user},
            {"LOGNAME", user},
            {"LANG", lang && *lang ? lang : "C.UTF-8"}};
    for (const auto& name : config.env_allow) {
      if (const char* value = ::getenv(name.c_str())) vars.insert_or_assign(name, value);
    }
  }
  for (const auto& [key, value] : overrides) vars.insert_or_assign(key, value);
  std::vector<std::string> env;
  env.reserve(vars.size());
  for (const auto& [key, value] : vars) {
    std::string item;
    item.reserve(key.size() + value.size() + 1);
    item.append(key).append("=").append(value);
    env.push_back(std::move(item));
  }
  return env;
}

std::vector<char*> pointersTo(std::vector<std::string>& items) {
  std::vector<char*> pointers;
  pointers.reserve(items.size() + 1);
  for (auto& item : items) pointers.push_back(item.data());
  pointers.push_back(nullptr);
  return pointers;
}

}  // namespace dockhand::plugins::process
