// Resource discovery: what this agent must offer, and finding the addresses.
//
//   ResourceRequests requests = mergeRequests(app_profile.executor_resources, config.resources);
//   auto given = loadResourcesFile(...);                 // Spark's --resourcesFile, as given
//   DiscoveryChain chain(discoverers);                   // discovery plugins, configured order
//   DiscoveryOutcome out = chain.discoverAll(requests, given);   // throws ResourceError
//
// A request for an amount of 0 or less is no request (Spark drops it): nothing is discovered
// for it and it never stops the start. For each other resource the file's allocation wins;
// otherwise each discoverer is asked in order, and the first that answers (anything but
// DH_DECLINED) wins, as in Spark. A request that names a discovery script then goes to the
// script step, the chain's last link whatever the configured order (Spark appends its script
// plugin to the configured ones the same way). An answer is checked: it must be {"name": <the
// requested name>, "addresses": [non-empty strings]}, with no address twice, and at least
// `amount` addresses. Each failure is a ResourceError whose
// message names the resource, the plugin and what was wrong; the agent refuses to start
// (exit code 9, resources-unavailable) with it.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "dockhand/base/result.h"
#include "dockhand/protocol/messages.h"
#include "plugins/resource_discovery_plugin.h"

namespace dockhand::agent {

using ResourceRequests = std::map<std::string, protocol::ExecutorResourceRequest>;

// The app's profile, overridden per resource by the agent's own config.
ResourceRequests mergeRequests(const ResourceRequests& profile, const ResourceRequests& local);

class ResourceError : public std::runtime_error {
 public:
  enum class Kind {
    kInsufficient,
    kDuplicate,
    kNameMismatch,
    kMalformed,
    kEmptyAddress,
    kPluginError,
    kNone
  };
  ResourceError(Kind kind, const std::string& what) : std::runtime_error(what), kind_(kind) {}
  Kind kind() const { return kind_; }

 private:
  Kind kind_;
};

// One link of the chain: a discovery plugin, or a fake in tests.
class Discoverer {
 public:
  virtual ~Discoverer() = default;
  virtual const std::string& name() const = 0;
  virtual PluginResult discover(const std::string& request_json) = 0;
  virtual PluginResult describe() { return PluginResult{DH_OK, "{}", {}}; }
  virtual PluginResult allocate(const std::string&) { return {}; }
  virtual PluginResult release(const std::string&) { return {}; }
};

// A Discoverer over a loaded discovery plugin. Each hook call goes through the instance's
// calls (plugins/plugin_calls.h): bounded by plugin_call_timeout_ms, and once one overran the
// plugin is stuck and every later call fails at once, naming the call that never returned, so
// the core thread (allocate/release) waits for a stuck plugin at most once.
class PluginDiscoverer final : public Discoverer {
 public:
  explicit PluginDiscoverer(std::shared_ptr<PluginInstance> instance)
      : plugin_(std::move(instance)) {}
  const std::string& name() const override { return plugin_.name(); }
  PluginResult discover(const std::string& request_json) override {
    return plugin_.discover(request_json);
  }
  PluginResult describe() override { return plugin_.describe(); }
  PluginResult allocate(const std::string& request) override { return plugin_.allocate(request); }
  PluginResult release(const std::string& request) override { return plugin_.release(request); }

 private:
  ResourceDiscoveryPlugin plugin_;
};

struct DiscoveredResource {
  protocol::ResourceInfo info;
  std::string source;  // the plugin's name, or "resources file <path>"
  std::int64_t requested = 0;
  Discoverer* owner = nullptr;  // the plugin that found it (nullptr: the file)
};

class DiscoveryChain {
 public:
  // The discoverers stay owned by the caller and must outlive the chain. `script_step`, when
  // set and not one of `discoverers`, is asked last, and only for a request that names a
  // discovery script.
  explicit DiscoveryChain(std::vector<Discoverer*> discoverers, Discoverer* script_step = nullptr);

  // Finds every requested resource. `given` are the resources file's allocations, taken as
  // they are (a given resource is not asked of any plugin). Throws ResourceError.
  std::map<std::string, DiscoveredResource> discoverAll(
      const ResourceRequests& requests, const std::map<std::string, protocol::ResourceInfo>& given,
      const std::string& given_source = "resources file");

  // Checks one answer of `plugin` for `request` and returns its addresses. Throws
  // ResourceError (kMalformed, kNameMismatch, kDuplicate, kEmptyAddress). Exposed for tests.
  static protocol::ResourceInfo parseAnswer(const std::string& plugin, const std::string& name,
                                            const std::string& answer_json);

  const std::vector<Discoverer*>& discoverers() const { return discoverers_; }

 private:
  std::vector<Discoverer*> discoverers_;
  Discoverer* script_step_ = nullptr;
};

// The agent-side accounting of resource addresses among running tasks. `amount_per_task`
// gives each resource's per-task amount from the profile: below 1 (e.g. 0.25) an address is
// shared by floor(1 / amount) tasks (4), at or above 1 each task holds its addresses alone.
// Counting is in whole slots, so it is exact.
class ResourceLedger {
 public:
  ResourceLedger(const std::map<std::string, DiscoveredResource>& resources,
                 const std::map<std::string, double>& amount_per_task);

  // Takes the addresses a task was given. Fails with the reason when it may not have them (an
  // unknown resource or address, an address listed twice, or one already used by as many
  // running tasks as its share allows); nothing is taken then.
  Result<void> acquire(std::uint64_t task_id,
                       const std::map<std::string, std::vector<std::string>>& want);
  // Gives a task's addresses back (no-op for an unknown task).
  void release(std::uint64_t task_id);

  // How many more tasks may use `address` of `resource` now.
  int freeSlots(const std::string& resource, const std::string& address) const;
  // How many tasks may hold one address of `resource` at once (0: not offered).
  int slotsPerAddress(const std::string& resource) const;
  static int slotsPerAddress(double amount_per_task);
  // What each running task holds: task id -> resource -> addresses.
  const std::map<std::uint64_t, std::map<std::string, std::vector<std::string>>>& held() const {
    return held_;
  }

 private:
  std::map<std::string, std::map<std::string, int>> free_;  // resource -> address -> free slots
  std::map<std::string, int> slots_;                        // resource -> slots per address
  std::map<std::uint64_t, std::map<std::string, std::vector<std::string>>> held_;
};

}  // namespace dockhand::agent
