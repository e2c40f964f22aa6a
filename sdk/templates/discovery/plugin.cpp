// The @NAME@ resource discovery plugin. Its config names one resource and how many addresses
// of it this machine has, {"resource": "widget", "count": 2}; it answers discovery requests for
// that resource with the addresses "0", "1", ... and declines every other resource (the agent
// then asks its next discovery plugin). Replace the counting with how your site finds them.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <dockhand/plugin.hpp>

namespace {

// The text after "key": in a flat JSON object (enough for this config and the requests).
std::string valueOf(std::string_view json, std::string_view key) {
  const std::string needle = "\"" + std::string(key) + "\"";
  auto at = json.find(needle);
  if (at == std::string_view::npos) return {};
  at = json.find_first_not_of(" :", at + needle.size());
  if (at == std::string_view::npos) return {};
  if (json[at] == '"') return std::string(json.substr(at + 1, json.find('"', at + 1) - at - 1));
  return std::string(json.substr(at, json.find_first_of(",}", at) - at));
}

}  // namespace

class DockhandTemplateClass : public dockhand::sdk::ResourceDiscovery {
 public:
  // The agent checks the config against this before the constructor runs.
  static constexpr const char* kConfigSchema = R"({
    "type": "object",
    "properties": {
      "resource": {"type": "string", "pattern": "^[a-z][a-z0-9_.-]*$"},
      "count": {"type": "integer", "minimum": 0, "maximum": 1024}
    },
    "required": ["resource", "count"],
    "additionalProperties": false
  })";

  DockhandTemplateClass(dockhand::sdk::Host host, std::string_view config_json)
      : host_(host),
        resource_(valueOf(config_json, "resource")),
        count_(std::stoul(valueOf(config_json, "count"))) {}

  // The agent's start-up thread; may block.
  std::optional<std::string> discover(std::string_view request_json) override {
    if (valueOf(request_json, "name") != resource_) return std::nullopt;  // not ours
    std::string addresses;
    for (unsigned long i = 0; i < count_; ++i) {
      addresses += (i == 0 ? "\"" : ", \"") + std::to_string(i) + "\"";
    }
    host_.info("found " + std::to_string(count_) + " " + resource_);
    return R"({"name": ")" + resource_ + R"(", "addresses": [)" + addresses + "]}";
  }

 private:
  dockhand::sdk::Host host_;
  std::string resource_;
  unsigned long count_;
};

DOCKHAND_PLUGIN(DockhandTemplateClass, "@NAME@", "0.1.0", "Finds the addresses of one resource")
