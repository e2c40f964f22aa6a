// BlockMigrationPlugin: a block-migration plugin instance as a C++ object. migrate() makes its
// call through the instance's PluginCalls and waits for the answer: call it from a migration
// thread. cancel() is the one hook made at once, from the caller's thread (any thread): it must
// reach a migrate() in progress.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "plugins/plugin_instance.h"

namespace dockhand::agent {

class BlockMigrationPlugin {
 public:
  // Throws PluginLoadError when the instance's plugin is not a migration plugin.
  explicit BlockMigrationPlugin(std::shared_ptr<PluginInstance> instance);

  const std::string& name() const { return instance_->name(); }

  // DH_OK with json = {"migrated": [...], "failed": [...]}, or an error. By default the one
  // call not bounded by plugin_call_timeout_ms: a migration takes as long as its blocks need,
  // and the decommission deadline (then cancel() and stop_grace_ms at exit) bounds it instead.
  // A non-zero `bound` bounds it as other calls are (`dockhand plugins check`'s one block).
  PluginResult migrate(const std::string& request_json,
                       std::chrono::milliseconds bound = std::chrono::milliseconds(0));
  void cancel();
  PluginInstance& instance() const { return *instance_; }

 private:
  std::shared_ptr<PluginInstance> instance_;
  const dh_block_migration_vtable* table_;
};

}  // namespace dockhand::agent
