#include "app/readiness.h"

namespace dockhand::agent {

std::optional<std::string> notReadyReason(const nlohmann::json& status) {
  if (!status.is_object()) return "starting";
  const auto state = status.find("state");
  if (state == status.end() || !state->is_string()) return "starting";
  if (*state != "running") return state->get<std::string>();
  const auto plugins = status.find("plugins");
  if (plugins != status.end() && plugins->is_array()) {
    for (const auto& plugin : *plugins) {
      if (!plugin.is_object() || !plugin.value("required", false)) continue;
      if (plugin.value("status", std::string()) == "loaded") continue;
      return "required plugin '" + plugin.value("name", std::string("?")) + "' is not loaded";
    }
  }
  return std::nullopt;
}

}  // namespace dockhand::agent
