#include "app/readiness.h"

namespace dockhand::agent {

std::optional<std::string> notReadyReason(const AgentSnapshot& snapshot) {
  const std::string& state = snapshot.backend.state;
  if (state.empty()) return "starting";
  if (state != "running") return state;
  if (snapshot.plugin_not_loaded) {
    return "required plugin '" + *snapshot.plugin_not_loaded + "' is not loaded";
  }
  return std::nullopt;
}

}  // namespace dockhand::agent
