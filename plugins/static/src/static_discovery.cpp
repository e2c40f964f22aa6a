// The `static` discovery plugin: the addresses of countable things listed in its config, for
// what no probe can find (FPGAs behind a vendor tool, licences, ports):
//   {"resources": {"fpga": ["0", "1"], "licence": ["a", "b", "c"]}}
// It answers for the resources it lists and declines every other one.
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "dockhand/plugin.hpp"

namespace {

using nlohmann::json;

class StaticDiscovery : public dockhand::sdk::ResourceDiscovery {
 public:
  static constexpr const char* kConfigSchema = R"({
    "type": "object",
    "properties": {
      "resources": {
        "type": "object",
        "additionalProperties": {"type": "array", "items": {"type": "string"}}
      }
    },
    "required": ["resources"],
    "additionalProperties": false
  })";

  StaticDiscovery(dockhand::sdk::Host host, std::string_view config_json) : host_(host) {
    json config = json::parse(config_json);
    for (const auto& [name, addresses] : config.at("resources").items()) {
      resources_[name] = addresses.get<std::vector<std::string>>();
    }
  }

  std::optional<std::string> discover(std::string_view request_json) override {
    const json request = json::parse(request_json);
    const std::string name = request.at("name").get<std::string>();
    auto it = resources_.find(name);
    if (it == resources_.end()) return std::nullopt;
    host_.debug("resource '" + name + "': " + std::to_string(it->second.size()) +
                " address(es) from the config");
    return json{{"name", name}, {"addresses", it->second}}.dump();
  }

  std::string describe() override { return json{{"resources", resources_}}.dump(); }

 private:
  dockhand::sdk::Host host_;
  std::map<std::string, std::vector<std::string>> resources_;
};

}  // namespace

DOCKHAND_PLUGIN(StaticDiscovery, "static", "0.1.0", "Resource addresses listed in the config")
