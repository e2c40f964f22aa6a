// Agent: the wiring of resource discovery (resources/agent_discovery.h does the discovering):
// the discovery plugins in the configured order, and the script step loaded on first need.
#include "app/agent.h"
#include "dockhand/base/logging.h"

namespace dockhand::agent {

Discoverer* Agent::loadScriptStep() {
  if (!script_step_spec_) return nullptr;
  const PluginSpec spec = *script_step_spec_;
  script_step_spec_.reset();  // tried once: a plugin that did not load is not tried again
  Discoverer* step = nullptr;
  for (LoadedPlugin& plugin : loadPlugins(host_, {spec}, /*create=*/true, pluginCallbacks())) {
    if (plugin.ok()) {
      logger("agent")->info("{} {} loaded from {} (resource_discovery)", plugin.library->label(),
                            plugin.library->version(), plugin.spec.origin);
      discoverers_.push_back(std::make_unique<PluginDiscoverer>(plugin.instance));
      step = discoverers_.back().get();
    }
    plugins_.push_back(std::move(plugin));
  }
  return step;
}

std::vector<std::unique_ptr<PluginDiscoverer>> Agent::makeDiscoverers() {
  std::vector<std::unique_ptr<PluginDiscoverer>> out;
  for (const LoadedPlugin& plugin : plugins_) {
    if (!plugin.ok() || !plugin.library->implements(DH_KIND_RESOURCE_DISCOVERY)) continue;
    out.push_back(std::make_unique<PluginDiscoverer>(plugin.instance));
    if (isScriptStep(plugin)) script_step_ = out.back().get();
  }
  return out;
}

std::vector<Discoverer*> Agent::discoverersInOrder() const {
  std::vector<Discoverer*> chain;
  chain.reserve(discoverers_.size());
  for (const auto& d : discoverers_) chain.push_back(d.get());
  return chain;
}

AgentDiscovery::Options Agent::discoveryOptions() const {
  AgentDiscovery::Options options;
  options.allow_profile_scripts = config_.allow_profile_discovery_scripts;
  options.configured = config_.resources;
  options.given = settings_.given_resources;
  options.given_source = "resources file " + config_.resources_file;
  return options;
}

}  // namespace dockhand::agent
