// The `host` discovery plugin: what the machine has — cores (online, in the affinity mask,
// under the cgroup's CPU quota), memory and the cgroup's memory limit — for the status output
// (describe()). It declines every addressable resource: cores and memory are counted, not
// addressed. Config (optional, for tests): {"proc_root": "/proc", "cgroup_root":
// "/sys/fs/cgroup"}.
#include <nlohmann/json.hpp>

#include "dockhand/plugin.hpp"
#include "host_info.h"

namespace {

using nlohmann::json;

class HostDiscovery : public dockhand::sdk::ResourceDiscovery {
 public:
  static constexpr const char* kConfigSchema = R"({
    "type": "object",
    "properties": {
      "proc_root": {"type": "string", "minLength": 1},
      "cgroup_root": {"type": "string", "minLength": 1}
    },
    "additionalProperties": false
  })";

  HostDiscovery(dockhand::sdk::Host host, std::string_view config_json) : host_(host) {
    const json config = json::parse(config_json);
    roots_.proc = config.value("proc_root", roots_.proc);
    roots_.cgroup = config.value("cgroup_root", roots_.cgroup);
  }

  std::optional<std::string> discover(std::string_view /*request_json*/) override {
    return std::nullopt;
  }

  std::string describe() override {
    const auto info = dockhand::host::probeHost(roots_);
    host_.debug("host: " + std::to_string(info.effective_cpus) + " effective core(s)");
    return info.toJson().dump();
  }

 private:
  dockhand::sdk::Host host_;
  dockhand::host::HostRoots roots_;
};

}  // namespace

DOCKHAND_PLUGIN(HostDiscovery, "host", "0.1.0", "This machine's cores, memory and cgroup limits")
