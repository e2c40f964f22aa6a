// The `listed-addresses` discovery plugin: its config lists the addresses of one resource,
//   {"resource": "fpga", "addresses": ["0", "1"]}
// and it answers requests for that resource with them; it declines every other resource, so
// the agent asks the next discovery plugin. allocate/release log which task holds what.
#include <string>
#include <string_view>
#include <vector>

#include <dockhand/plugin.hpp>

namespace {

std::string stringField(std::string_view json, std::string_view key) {
  const std::string needle = "\"" + std::string(key) + "\"";
  auto at = json.find(needle);
  if (at == std::string_view::npos) return {};
  at = json.find('"', json.find(':', at + needle.size()) + 1);
  const auto end = json.find('"', at + 1);
  return std::string(json.substr(at + 1, end - at - 1));
}

// The strings of the array "key" (the schema guarantees it holds strings only).
std::vector<std::string> stringList(std::string_view json, std::string_view key) {
  std::vector<std::string> out;
  const std::string needle = "\"" + std::string(key) + "\"";
  auto at = json.find(needle);
  if (at == std::string_view::npos) return out;
  at = json.find('[', at);
  const auto end = json.find(']', at);
  for (auto q = json.find('"', at); q < end; q = json.find('"', q + 1)) {
    const auto close = json.find('"', q + 1);
    out.emplace_back(json.substr(q + 1, close - q - 1));
    q = close;
  }
  return out;
}

}  // namespace

class ListedAddresses : public dockhand::sdk::ResourceDiscovery {
 public:
  static constexpr const char* kConfigSchema = R"({
    "type": "object",
    "properties": {
      "resource": {"type": "string", "minLength": 1},
      "addresses": {"type": "array", "items": {"type": "string"}}
    },
    "required": ["resource", "addresses"],
    "additionalProperties": false
  })";

  ListedAddresses(dockhand::sdk::Host host, std::string_view config_json)
      : host_(host),
        resource_(stringField(config_json, "resource")),
        addresses_(stringList(config_json, "addresses")) {}

  // Start-up thread; may block (this one does not need to).
  std::optional<std::string> discover(std::string_view request_json) override {
    if (stringField(request_json, "name") != resource_) return std::nullopt;  // decline
    std::string list;
    for (const auto& a : addresses_) list += (list.empty() ? "\"" : ", \"") + a + "\"";
    return R"({"name": ")" + resource_ + R"(", "addresses": [)" + list + "]}";
  }

  void allocate(std::string_view allocation_json) override {
    host_.info("allocate " + std::string(allocation_json));
  }
  void release(std::string_view allocation_json) override {
    host_.info("release " + std::string(allocation_json));
  }
  std::string describe() override {
    return R"({"resource": ")" + resource_ + R"(", "count": )" + std::to_string(addresses_.size()) +
           "}";
  }

 private:
  dockhand::sdk::Host host_;
  std::string resource_;
  std::vector<std::string> addresses_;
};

DOCKHAND_PLUGIN(ListedAddresses, "listed-addresses", "1.0.0",
                "Addresses of one resource, listed in the config")
