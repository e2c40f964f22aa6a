#include "plugins/resource_discovery_plugin.h"

namespace dockhand::agent {

ResourceDiscoveryPlugin::ResourceDiscoveryPlugin(std::shared_ptr<PluginInstance> instance)
    : instance_(std::move(instance)), table_(instance_->descriptor().resource_discovery) {
  if (!instance_->library().implements(DH_KIND_RESOURCE_DISCOVERY) || table_ == nullptr) {
    throw PluginLoadError(instance_->library().label() + ": not a resource discovery plugin");
  }
}

PluginResult ResourceDiscoveryPlugin::discover(const std::string& request_json) {
  const char* out = nullptr;
  dh_status status = table_->discover(instance_->handle(), request_json.c_str(), &out);
  if (status == DH_DECLINED) return PluginResult{DH_DECLINED, {}, {}};
  return instance_->result(status, out);
}

PluginResult ResourceDiscoveryPlugin::allocate(const std::string& allocation_json) {
  if (table_->allocate == nullptr) return {};
  dh_status status = timedCoreHook(*instance_, "allocate", [&] {
    return table_->allocate(instance_->handle(), allocation_json.c_str());
  });
  return instance_->result(status);
}

PluginResult ResourceDiscoveryPlugin::release(const std::string& allocation_json) {
  if (table_->release == nullptr) return {};
  dh_status status = timedCoreHook(*instance_, "release", [&] {
    return table_->release(instance_->handle(), allocation_json.c_str());
  });
  return instance_->result(status);
}

PluginResult ResourceDiscoveryPlugin::describe() {
  if (table_->describe == nullptr) return PluginResult{DH_OK, "{}", {}};
  const char* out = nullptr;
  dh_status status = table_->describe(instance_->handle(), &out);
  return instance_->result(status, out);
}

}  // namespace dockhand::agent
