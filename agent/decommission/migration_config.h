// The config a block-migration plugin is created with (docs/plugins.md, section 8): each agent
// setting the plugin's config schema declares, under what its configs give it. The agent's
// config reading (app/plugin_loader.h) says which settings there are and what they hold; the
// rule that composes them is here, beside the decommission that runs the plugins.
//
// Pure: no I/O, no state.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "dockhand/base/result.h"

namespace dockhand::agent {

// An agent setting a block-migration plugin may take in its config: the key, where it comes
// from in the agent's config (for the error when a plugin needs one that is not set), and its
// value (null: not set, not offered).
struct MigrationSetting {
  std::string key;
  std::string setting;
  nlohmann::json value;
};

// The config of block-migration plugin `plugin`: each of `settings` whose key its `schema`
// declares (under "properties") and `given` lacks, then `given` over them. An error names the
// setting when the schema requires one that is neither set nor given. A plugin without a
// schema gets `given` alone. Checking the result against the schema is the plugin host's.
Result<nlohmann::json> composeMigrationConfig(const std::string& plugin,
                                              const nlohmann::json& given,
                                              const std::vector<MigrationSetting>& settings,
                                              const nlohmann::json& schema);

}  // namespace dockhand::agent
