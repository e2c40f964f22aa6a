#include "plugins/resource_discovery_plugin.h"

namespace dockhand::agent {

ResourceDiscoveryPlugin::ResourceDiscoveryPlugin(std::shared_ptr<PluginInstance> instance)
    : instance_(std::move(instance)), table_(instance_->descriptor().resource_discovery) {
  if (!instance_->library().implements(DH_KIND_RESOURCE_DISCOVERY) || table_ == nullptr) {
    throw PluginLoadError(instance_->library().label() + ": not a resource discovery plugin");
  }
}

PluginResult ResourceDiscoveryPlugin::discover(const std::string& request_json) {
  return instance_->calls().call(
      {"discover"}, [instance = instance_.get(), table = table_, request_json] {
        const char* out = nullptr;
        dh_status status = table->discover(instance->handle(), request_json.c_str(), &out);
        if (status == DH_DECLINED) return PluginResult{DH_DECLINED, {}, {}};
        return instance->result(status, out);
      });
}

PluginResult ResourceDiscoveryPlugin::allocate(const std::string& allocation_json) {
  if (table_->allocate == nullptr) return {};  // no call for a hook that does nothing
  return instance_->calls().call(
      {"allocate"}, [instance = instance_.get(), table = table_, allocation_json] {
        dh_status status = table->allocate(instance->handle(), allocation_json.c_str());
        return instance->result(status);
      });
}

PluginResult ResourceDiscoveryPlugin::release(const std::string& allocation_json) {
  if (table_->release == nullptr) return {};
  return instance_->calls().call(
      {"release"}, [instance = instance_.get(), table = table_, allocation_json] {
        dh_status status = table->release(instance->handle(), allocation_json.c_str());
        return instance->result(status);
      });
}

PluginResult ResourceDiscoveryPlugin::describe() {
  if (table_->describe == nullptr) return PluginResult{DH_OK, "{}", {}};
  return instance_->calls().call({"describe"}, [instance = instance_.get(), table = table_] {
    const char* out = nullptr;
    dh_status status = table->describe(instance->handle(), &out);
    return instance->result(status, out);
  });
}

}  // namespace dockhand::agent
