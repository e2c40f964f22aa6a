#include "app/config_reload.h"

#include <algorithm>

namespace dockhand::agent {
namespace {

void compare(const std::string& path, const nlohmann::json& running, const nlohmann::json& wanted,
             ReloadPlan& plan) {
  if (running.is_object() && wanted.is_object()) {
    const auto below = [&path](const std::string& key) {
      std::string at = path;
      at.append("/").append(key);
      return at;
    };
    for (const auto& [key, value] : running.items()) {
      const auto other = wanted.find(key);
      compare(below(key), value, other == wanted.end() ? nlohmann::json() : *other, plan);
    }
    for (const auto& [key, value] : wanted.items()) {
      if (!running.contains(key)) compare(below(key), nlohmann::json(), value, plan);
    }
    return;
  }
  if (running == wanted) return;
  const auto& live = liveConfigPaths();
  auto& into =
      std::find(live.begin(), live.end(), path) != live.end() ? plan.live : plan.at_restart;
  into.push_back({path, running, wanted});
}

}  // namespace

const std::vector<std::string>& liveConfigPaths() {
  static const std::vector<std::string> kLive = {"/log_level", "/keep_task_dirs"};
  return kLive;
}

ReloadPlan planReload(const nlohmann::json& running, const nlohmann::json& wanted) {
  ReloadPlan plan;
  compare("", running, wanted, plan);
  return plan;
}

}  // namespace dockhand::agent
