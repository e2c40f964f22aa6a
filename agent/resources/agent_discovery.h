// AgentDiscovery: resource discovery as the driver's app config asks for it, once, before the
// agent registers (BackendOptions::discover_resources). The discovery plugins are asked in the
// configured order, the script step last (loaded only when a request names a discovery
// script, so an agent whose resources need none never maps it); the resources found are
// registered with the ResourceGuard; what each plugin describes is kept for the status
// (docs/resources.md).
//
// Core thread only. The discoverers and the guard belong to the agent and outlive this.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "dockhand/base/result.h"
#include "dockhand/protocol/messages.h"
#include "resources/resource_discovery.h"
#include "resources/resource_guard.h"
#include "resources/resource_status.h"

namespace dockhand::agent {

class AgentDiscovery {
 public:
  struct Options {
    // allow_profile_discovery_scripts: false drops the scripts an app's profile names (each
    // is logged), so only the agent's own config may name one.
    bool allow_profile_scripts = false;
    ResourceRequests configured;                          // the agent's own, over the profile's
    std::map<std::string, protocol::ResourceInfo> given;  // the resources file's, as they are
    std::string given_source;                             // "resources file <path>"
  };
  // Loads the script step the first time a request names a script and the chain has none:
  // the discoverer, or null when there is none or it failed to load (asked once).
  using ScriptStepLoader = std::function<Discoverer*()>;

  // `chain` in the configured order; `script_step` (one of them, or null) is asked last.
  AgentDiscovery(Options options, ResourceGuard& guard, const std::vector<Discoverer*>& chain,
                 Discoverer* script_step, ScriptStepLoader load_script_step);

  // Finds what `profile` asks for (over the agent's own requests) and registers it with the
  // guard: the resources to register, or why this agent cannot offer them.
  Result<std::map<std::string, protocol::ResourceInfo>> discover(
      const protocol::ResourceProfile& profile);

  // For the status output: the resources found (empty before discover() succeeded) and how
  // they are used now, and {"chain": [names], "plugins": {name: described}} (null before).
  const std::map<std::string, DiscoveredResource>& found() const { return found_; }
  std::map<std::string, AddressUse> use() const { return addressUse(found_, guard_.ledger()); }
  nlohmann::json resourcesJson() const;
  nlohmann::json discoveryJson() const;

 private:
  Options options_;
  ResourceGuard& guard_;
  std::vector<Discoverer*> chain_;
  Discoverer* script_step_ = nullptr;
  ScriptStepLoader load_script_step_;
  bool script_step_asked_ = false;
  bool done_ = false;
  std::map<std::string, DiscoveredResource> found_;
  std::map<std::string, double> amount_per_task_;
  std::vector<std::string> asked_;                   // the chain's names, in the order asked
  std::map<std::string, nlohmann::json> described_;  // plugin name -> its describe() answer
};

}  // namespace dockhand::agent
