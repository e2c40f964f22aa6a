// AgentRuntime: the plugins the agent runs with, and the executor built on them.
//
// Plugin directories are searched in order: the config's plugin_dirs, the build or install
// tree next to the program (<bin>/../lib/dockhand/plugins), then the installed default
// (/usr/lib/dockhand/plugins). Plugins come from the config and the drop-in manifests (see
// plugin_loader.h). A required plugin that fails stops the agent before it connects; an
// optional one is logged, left out, and listed with its error in plugins().
#pragma once

#include <filesystem>
#include <memory>
#include <vector>

#include "app/agent_config.h"
#include "app/plugin_loader.h"
#include "executor/plugin_executor.h"
#include "plugins/plugin_host.h"
#include "resources/resource_discovery.h"
#include "resources/resource_guard.h"

namespace dockhand::agent {

// A required plugin could not be loaded or created; what() is the one line to show.
using PluginLoadFailure = PluginLoadError;

class AgentRuntime {
 public:
  // Throws PluginLoadFailure.
  AgentRuntime(const AgentConfig& config, EventSink& events,
               PluginExecutor::StatusHandler on_status);
  ~AgentRuntime();
  AgentRuntime(const AgentRuntime&) = delete;
  AgentRuntime& operator=(const AgentRuntime&) = delete;

  // The executor the Backend drives: the plugin executor behind the resource checks.
  Executor& executor() { return *guard_; }
  // See PluginExecutor::stopRunners: the task runners a call of which did not return.
  std::vector<std::string> stopRunners(std::chrono::milliseconds grace) {
    return executor_->stopRunners(grace);
  }
  // Every plugin asked for, loaded or not (status output).
  const std::vector<LoadedPlugin>& plugins() const { return plugins_; }

  // Makes finished tasks' outputs blocks of `store` (see PluginExecutor::attachBlockStore).
  void attachBlockStore(BlockStore& store, std::string block_url) {
    executor_->attachBlockStore(store, std::move(block_url));
  }
  // One instance of each block-migration plugin in decommission.migration, in that order,
  // configured from the decommission settings. Each plugin's progress reports are logged
  // (debug) and handed to `on_progress` (any thread). Throws PluginLoadFailure.
  std::vector<std::unique_ptr<BlockMigrationPlugin>> createMigrationPlugins(
      const AgentConfig& config, std::function<void(std::string_view)> on_progress);
  // Signs this agent's requests to other block servers (input fetches, and migration plugins
  // created after this call, through dh_host.sign_request).
  void setRequestSigner(protocol::auth::RequestSigner signer);
  // Input fetches use this TLS client context (https:// block servers).
  void setTlsClientContext(Poco::Net::Context::Ptr tls) {
    executor_->setTlsClientContext(std::move(tls));
  }

  // Runs the discovery chain (the discovery plugins in load order) for the app's resource
  // profile merged with the config's `resources`, over the resources file's allocations, and
  // arms the resource checks with the result. Throws ResourceError (and ConfigError for a bad
  // resources file). Blocks while scripts run.
  std::map<std::string, DiscoveredResource> discoverResources(
      const protocol::ResourceProfile& profile);
  // The discovery plugins, in chain order.
  std::vector<Discoverer*> discoverers();

  // The runtime's part of the status output (GET /v1/status), read on the core thread:
  //   "resources": each registered resource, who found it, its details and its allocation
  //                (resourceStatusJson; {} before discovery);
  //   "discovery": {"chain": [plugin names], "plugins": {name: describe() answer}}, as of
  //                discovery (null before);
  //   "plugins":   every plugin asked for, loaded or not (pluginReport, the shape of
  //                `dockhand plugins list --json`), a failed optional one with its error.
  nlohmann::json statusJson() const;

 private:
  PluginHost host_;
  std::vector<LoadedPlugin> plugins_;
  std::vector<std::unique_ptr<PluginDiscoverer>> discoverers_;
  ResourceRequests local_requests_;
  std::string resources_file_;
  std::unique_ptr<PluginExecutor> executor_;
  std::unique_ptr<ResourceGuard> guard_;
  protocol::auth::RequestSigner signer_;
  // As of the last discovery, for statusJson().
  bool discovered_ = false;
  std::map<std::string, DiscoveredResource> found_;
  std::map<std::string, double> amount_per_task_;
  std::vector<std::string> chain_;
  std::map<std::string, nlohmann::json> described_;
};

// The directories searched for plugins, in order (see above).
std::vector<std::filesystem::path> pluginSearchPath(const AgentConfig& config);

}  // namespace dockhand::agent
