// ResourceDiscoveryPlugin: a resource-discovery plugin instance as a C++ object. Call it from
// the start-up thread (discover may block) and the core thread (allocate/release).
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
