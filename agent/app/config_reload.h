// What a reload (SIGHUP, `systemctl reload dockhand`) may change in a running agent.
//
// The agent reads its configuration again from the same sources it started with (the --config
// files and their agent.d/ fragments, the environment, the command line). A file that does not
// load changes nothing. Otherwise the two effective configurations are compared member by
// member (as `dockhand config show` prints them): a setting that can change live is applied,
// and every other difference is named by its JSON path and left as it was, to take effect at
// the next restart in place.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace dockhand::agent {

struct ConfigChange {
  std::string path;  // a JSON pointer: "/log_level", "/decommission/deadline_ms"
  nlohmann::json from;
  nlohmann::json to;
};

struct ReloadPlan {
  std::vector<ConfigChange> live;        // to apply now
  std::vector<ConfigChange> at_restart;  // left as they are
};

// The JSON paths a reload applies live: /log_level, /keep_task_dirs.
const std::vector<std::string>& liveConfigPaths();

// Compares `running` and `wanted` (configToJson of each). Objects are compared member by
// member; arrays and values as a whole.
ReloadPlan planReload(const nlohmann::json& running, const nlohmann::json& wanted);

}  // namespace dockhand::agent
