// ResourceDiscoveryPlugin: a resource-discovery plugin instance as a C++ object. Each method
// makes its hook call through the instance's PluginCalls and waits for the answer (at most
// plugin_call_timeout_ms): discover() from the start-up thread, allocate()/release() from the
// core thread. Once a call overran, every later one fails at once (plugin_calls.h).
#pragma once

#include <memory>
#include <string>

#include "plugins/plugin_instance.h"

namespace dockhand::agent {

class ResourceDiscoveryPlugin {
 public:
  // Throws PluginLoadError when the instance's plugin is not a discovery plugin.
  explicit ResourceDiscoveryPlugin(std::shared_ptr<PluginInstance> instance);

  const std::string& name() const { return instance_->name(); }

  // DH_OK with json = {"name": ..., "addresses": [...]}, DH_DECLINED, or an error.
  PluginResult discover(const std::string& request_json);
  // Optional hooks: DH_OK when the plugin does not implement them.
  PluginResult allocate(const std::string& allocation_json);
  PluginResult release(const std::string& allocation_json);
  bool implementsAllocate() const { return table_->allocate != nullptr; }
  bool implementsRelease() const { return table_->release != nullptr; }
  PluginResult describe();

 private:
  std::shared_ptr<PluginInstance> instance_;
  const dh_resource_discovery_vtable* table_;
};

}  // namespace dockhand::agent
