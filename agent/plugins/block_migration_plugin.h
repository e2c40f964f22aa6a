// BlockMigrationPlugin: a block-migration plugin instance as a C++ object. migrate() blocks;
// call it from a migration thread. cancel() may be called from any thread.
#pragma once

#include <memory>
#include <string>

#include "plugins/plugin_instance.h"

namespace dockhand::agent {

class BlockMigrationPlugin {
 public:
  // Throws PluginLoadError when the instance's plugin is not a migration plugin.
  explicit BlockMigrationPlugin(std::shared_ptr<PluginInstance> instance);

  const std::string& name() const { return instance_->name(); }

  // DH_OK with json = {"migrated": [...], "failed": [...]}, or an error.
  PluginResult migrate(const std::string& request_json);
  void cancel();

 private:
  std::shared_ptr<PluginInstance> instance_;
  const dh_block_migration_vtable* table_;
};

}  // namespace dockhand::agent
