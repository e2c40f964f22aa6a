// Agent: resource discovery, as the driver's app config asks for it: the discovery plugins in
// the configured order, the script step last (loaded only when a request names a script), the
// resources found registered with the ResourceGuard, and what each plugin describes kept for
// the status (docs/resources.md).
#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "app/agent.h"
#include "dockhand/base/logging.h"

namespace dockhand::agent {
namespace {

// A discovery plugin's describe() answer as JSON, or {"error": why} (logged at warn).
nlohmann::json describeForStatus(Discoverer& discoverer) {
  PluginResult described = discoverer.describe();
  std::string why = described.error;
  if (described.ok()) {
    nlohmann::json details = nlohmann::json::parse(described.json, nullptr, false);
    if (!details.is_discarded()) return details;
    why = "describe() answered with malformed JSON";
  }
  logger("agent")->warn("discovery plugin '{}': {}; its details are left out of the status",
                        discoverer.name(), why);
  return {{"error", why}};
}

}  // namespace

void Agent::loadScriptStep() {
  const PluginSpec spec = *script_step_spec_;
  script_step_spec_.reset();  // tried once: a plugin that did not load is not tried again
  for (LoadedPlugin& plugin : loadPlugins(host_, {spec}, /*create=*/true, pluginCallbacks())) {
    if (plugin.ok()) {
      logger("agent")->info("{} {} loaded from {} (resource_discovery)", plugin.library->label(),
                            plugin.library->version(), plugin.spec.origin);
      discoverers_.push_back(std::make_unique<PluginDiscoverer>(plugin.instance));
      script_step_ = discoverers_.back().get();
    }
    plugins_.push_back(std::move(plugin));
  }
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

std::string Agent::discoverResources(const protocol::ResourceProfile& profile,
                                     std::map<std::string, protocol::ResourceInfo>& resources) {
  auto log = logger("agent");
  std::vector<Discoverer*> chain_order;
  for (auto& d : discoverers_) {
    if (d.get() != script_step_) chain_order.push_back(d.get());
  }
  ResourceRequests requested = profile.executor_resources;
  if (!config_.allow_profile_discovery_scripts) {
    for (auto& [name, request] : requested) {
      if (request.discovery_script.empty()) continue;
      log->warn(
          "resource {}: the app's discovery script {} is not run (allow_profile_discovery_scripts "
          "is false)",
          name, request.discovery_script);
      request.discovery_script.clear();
    }
  }
  try {
    const ResourceRequests wanted = mergeRequests(requested, config_.resources);
    const bool names_a_script = std::any_of(wanted.begin(), wanted.end(), [](const auto& request) {
      return !request.second.discovery_script.empty();
    });
    if (names_a_script && script_step_ == nullptr && script_step_spec_) loadScriptStep();
    DiscoveryChain chain(chain_order, script_step_);
    auto found = chain.discoverAll(wanted, settings_.given_resources,
                                   "resources file " + config_.resources_file);
    guard_.setResources(found, profile.task_resources);
    // What each discovery plugin describes (an nvidia GPU's name, the host's cgroup limits),
    // asked once: a describe() may run a program, too slow for every status refresh.
    discovery_.chain.clear();
    discovery_.described.clear();
    if (script_step_ != nullptr) chain_order.push_back(script_step_);
    for (Discoverer* d : chain_order) {
      discovery_.chain.push_back(d->name());
      discovery_.described[d->name()] = describeForStatus(*d);
    }
    discovery_.found = found;
    discovery_.amount_per_task = profile.task_resources;
    discovery_.done = true;
    resources.clear();
    for (const auto& [name, r] : found) {
      log->info("resource {}: [{}] found by {} ({} requested)", name,
                fmt::join(r.info.addresses, ", "), r.source, r.requested);
      resources[name] = r.info;
    }
    return {};
  } catch (const ResourceError& e) {
    return e.what();
  } catch (const ConfigError& e) {
    return e.what();
  }
}

}  // namespace dockhand::agent
