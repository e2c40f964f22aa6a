#include "plugins/block_migration_plugin.h"

namespace dockhand::agent {

BlockMigrationPlugin::BlockMigrationPlugin(std::shared_ptr<PluginInstance> instance)
    : instance_(std::move(instance)), table_(instance_->descriptor().block_migration) {
  if (!instance_->library().implements(DH_KIND_BLOCK_MIGRATION) || table_ == nullptr) {
    throw PluginLoadError(instance_->library().label() + ": not a block migration plugin");
  }
}

PluginResult BlockMigrationPlugin::migrate(const std::string& request_json,
                                           std::chrono::milliseconds bound) {
  return instance_->calls().call(
      {"migrate"},
      [instance = instance_.get(), table = table_, request_json] {
        const char* out = nullptr;
        dh_status status = table->migrate(instance->handle(), request_json.c_str(), &out);
        return instance->result(status, out);
      },
      bound);
}

void BlockMigrationPlugin::cancel() {
  if (table_->cancel != nullptr) table_->cancel(instance_->handle());
}

}  // namespace dockhand::agent
