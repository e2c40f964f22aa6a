#include "resources/agent_discovery.h"

#include <algorithm>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "dockhand/base/config_error.h"
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

AgentDiscovery::AgentDiscovery(Options options, ResourceGuard& guard,
                               const std::vector<Discoverer*>& chain, Discoverer* script_step,
                               ScriptStepLoader load_script_step)
    : options_(std::move(options)),
      guard_(guard),
      script_step_(script_step),
      load_script_step_(std::move(load_script_step)) {
  for (Discoverer* d : chain) {
    if (d != script_step_) chain_.push_back(d);
  }
}

Result<std::map<std::string, protocol::ResourceInfo>> AgentDiscovery::discover(
    const protocol::ResourceProfile& profile) {
  auto log = logger("agent");
  ResourceRequests requested = profile.executor_resources;
  if (!options_.allow_profile_scripts) {
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
    const ResourceRequests wanted = mergeRequests(requested, options_.configured);
    const bool names_a_script = std::any_of(wanted.begin(), wanted.end(), [](const auto& request) {
      return !request.second.discovery_script.empty();
    });
    if (names_a_script && script_step_ == nullptr && !script_step_asked_ && load_script_step_) {
      script_step_asked_ = true;  // a script step that did not load is not tried again
      script_step_ = load_script_step_();
    }
    DiscoveryChain chain(chain_, script_step_);
    auto found = chain.discoverAll(wanted, options_.given, options_.given_source);
    guard_.setResources(found, profile.task_resources);
    // What each discovery plugin describes (an nvidia GPU's name, the host's cgroup limits),
    // asked once: a describe() may run a program, too slow for every status refresh.
    asked_.clear();
    described_.clear();
    std::vector<Discoverer*> asked = chain_;
    if (script_step_ != nullptr) asked.push_back(script_step_);
    for (Discoverer* d : asked) {
      asked_.push_back(d->name());
      described_[d->name()] = describeForStatus(*d);
    }
    found_ = found;
    amount_per_task_ = profile.task_resources;
    done_ = true;
    std::map<std::string, protocol::ResourceInfo> resources;
    for (const auto& [name, r] : found) {
      log->info("resource {}: [{}] found by {} ({} requested)", name,
                fmt::join(r.info.addresses, ", "), r.source, r.requested);
      resources[name] = r.info;
    }
    return resources;
  } catch (const ResourceError& e) {
    return Error(e.what());
  } catch (const ConfigError& e) {
    return Error(e.what());
  }
}

nlohmann::json AgentDiscovery::resourcesJson() const {
  return resourceStatusJson(found_, amount_per_task_, guard_.ledger(), described_);
}

nlohmann::json AgentDiscovery::discoveryJson() const {
  if (!done_) return nullptr;
  nlohmann::json plugins = nlohmann::json::object();
  for (const auto& [name, details] : described_) plugins[name] = details;
  return {{"chain", asked_}, {"plugins", std::move(plugins)}};
}

}  // namespace dockhand::agent
