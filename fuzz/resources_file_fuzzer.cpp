// Spark resources files (--resourcesFile): a JSON array of {"id": {"componentName": ...,
// "resourceName": ...}, "addresses": [...]}. parseResourcesJson must refuse bad text only
// with a ConfigError naming the file; what it accepts names each resource once, lists each
// address once, and reads back the same when written out in Spark's format.
#include <cstddef>
#include <cstdint>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "fuzz_check.h"
#include "resources/resources_file.h"

using dockhand::ConfigError;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::map<std::string, dockhand::protocol::ResourceInfo> resources;
  try {
    resources = dockhand::agent::parseResourcesJson(text, "resources.json");
  } catch (const ConfigError& e) {
    DOCKHAND_FUZZ_CHECK(std::string(e.what()).rfind("resources.json: ", 0) == 0, e.what());
    return 0;
  }

  nlohmann::json written = nlohmann::json::array();
  for (const auto& [name, info] : resources) {
    DOCKHAND_FUZZ_CHECK(info.name == name, name);
    const std::set<std::string> unique(info.addresses.begin(), info.addresses.end());
    DOCKHAND_FUZZ_CHECK(unique.size() == info.addresses.size(), name);
    written.push_back({{"id", {{"componentName", "spark.executor"}, {"resourceName", name}}},
                       {"addresses", info.addresses}});
  }
  std::map<std::string, dockhand::protocol::ResourceInfo> again;
  try {
    again = dockhand::agent::parseResourcesJson(written.dump(), "written.json");
  } catch (const ConfigError& e) {
    DOCKHAND_FUZZ_CHECK(false, "a resources file written from accepted resources is refused: " +
                                   written.dump() + ": " + e.what());
  }
  DOCKHAND_FUZZ_CHECK(again.size() == resources.size(), written.dump());
  for (const auto& [name, info] : resources) {
    DOCKHAND_FUZZ_CHECK(again.count(name) == 1 && again.at(name).addresses == info.addresses, name);
  }
  return 0;
}
