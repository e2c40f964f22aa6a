#include "decommission/migration_config.h"

#include <algorithm>

#include <fmt/format.h>

namespace dockhand::agent {

using nlohmann::json;

Result<json> composeMigrationConfig(const std::string& plugin, const json& given,
                                    const std::vector<MigrationSetting>& settings,
                                    const json& schema) {
  const json properties =
      schema.is_object() ? schema.value("properties", json::object()) : json::object();
  const json required =
      schema.is_object() ? schema.value("required", json::array()) : json::array();
  json config = json::object();
  for (const MigrationSetting& s : settings) {
    if (!properties.is_object() || !properties.contains(s.key) || given.contains(s.key)) continue;
    if (!s.value.is_null()) {
      config[s.key] = s.value;
    } else if (required.is_array() &&
               std::find(required.begin(), required.end(), s.key) != required.end()) {
      return Error(fmt::format(
          "decommission.migration names '{}' but {} is not set (or give the plugin's {} in its "
          "config)",
          plugin, s.setting, s.key));
    }
  }
  if (given.is_object()) config.update(given);
  return config;
}

}  // namespace dockhand::agent
