#include "resources/resources_file.h"

#include <set>

#include <fmt/format.h>

#include "dockhand/base/config_file.h"
#include "dockhand/protocol/json_reader.h"

namespace dockhand::agent {

using nlohmann::json;
using protocol::JsonPathError;
using protocol::JsonReader;

std::map<std::string, protocol::ResourceInfo> loadResourcesFile(const std::string& path) {
  return parseResourcesJson(readConfigText(path), path);
}

std::map<std::string, protocol::ResourceInfo> parseResourcesJson(const std::string& text,
                                                                 const std::string& origin) {
  json root = parseConfigJson(text, origin);
  std::map<std::string, protocol::ResourceInfo> out;
  try {
    if (!root.is_array()) {
      throw JsonPathError("", "expected an array of resource allocations");
    }
    for (std::size_t i = 0; i < root.size(); ++i) {
      JsonReader entry(root[i], "/" + std::to_string(i));
      JsonReader id = entry.requiredObject("id");
      protocol::ResourceInfo info;
      info.name = id.requiredString("resourceName");
      info.addresses = entry.optionalStringList("addresses");
      if (out.count(info.name) != 0) {
        throw JsonPathError(id.childPath("resourceName"),
                            fmt::format("resource '{}' is allocated twice", info.name));
      }
      std::set<std::string> seen;
      for (const auto& address : info.addresses) {
        if (!seen.insert(address).second) {
          throw JsonPathError(entry.childPath("addresses"),
                              fmt::format("address '{}' is listed twice", address));
        }
      }
      out.emplace(info.name, std::move(info));
    }
  } catch (const JsonPathError& e) {
    throw ConfigError(fmt::format("{}: {}: {}", origin, e.path(), e.detail()));
  }
  return out;
}

}  // namespace dockhand::agent
