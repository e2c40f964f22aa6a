// PluginDecommissioner: the Decommissioner port over block-migration plugins.
//
// A pass runs on a thread of its own: it takes the blocks of the kinds to migrate that the
// store holds, hands them to the first plugin in the configured order (with the peers the
// Backend got from the driver), then what that plugin could not move to the next one, and so
// on ("peer" first, "fallback" for the rest). A plugin reports a block migrated only once a
// complete, verified copy exists at the destination. The result is posted to the core
// thread; local copies are deleted only when the Backend calls release() after telling the
// driver where they went.
//
// The decommissioner creates its plugins itself, through the factory it is built with, so
// that their progress reports reach it from the start: the factory gets the callback to give
// each plugin (dh_host.migration_progress) and returns the plugins in pass order.
//
// Lifetime: the EventSink and the store must outlive this object, which owns the plugins; the
// destructor
// cancels a running pass and joins its thread. A plugin may ignore cancel() and never return
// from migrate(): stopPass() bounds the wait, and the agent then exits without destroying the
// decommissioner (the process ends the stuck call).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "blocks/block_id.h"
#include "blocks/block_store.h"
#include "core/ports.h"
#include "plugins/block_migration_plugin.h"

namespace dockhand::agent {

struct MigrationKinds {
  bool shuffle = true;
  bool rdd = true;
  bool task = true;
  bool includes(BlockKind kind) const;
  bool any() const { return shuffle || rdd || task; }
};

// Creates the migration plugins, in pass order, each reporting progress through `progress`.
// Throws PluginLoadError.
using MigrationPluginFactory = std::function<std::vector<std::unique_ptr<BlockMigrationPlugin>>(
    MigrationProgressCallback progress)>;

class PluginDecommissioner final : public Decommissioner {
 public:
  // on_begin runs (on the core thread) when decommissioning starts: the agent stops the block
  // server from taking new blocks there. Throws what `make_plugins` throws.
  PluginDecommissioner(EventSink& events, BlockStore& store,
                       const MigrationPluginFactory& make_plugins, MigrationKinds kinds,
                       std::function<void()> on_begin);
  ~PluginDecommissioner() override;
  PluginDecommissioner(const PluginDecommissioner&) = delete;
  PluginDecommissioner& operator=(const PluginDecommissioner&) = delete;

  bool migrationEnabled() const override { return !plugins_.empty() && kinds_.any(); }
  void begin() override;
  void startPass(std::vector<protocol::Peer> peers,
                 std::function<void(MigrationPassProgress)> progress,
                 std::function<void(MigrationPassResult)> done) override;
  void release(const std::vector<std::string>& block_ids) override;
  std::vector<std::string> blocksLeft() const override;
  void cancel() override;

  // Cancels a running pass and waits up to `timeout` for its thread to end. False when it is
  // still running (a plugin call that does not return): the destructor would block then.
  bool stopPass(std::chrono::milliseconds timeout);
  // The plugin whose migrate() the running pass is in ("" when none).
  std::string pluginInCall() const;

  // Runs one pass on the calling thread (what the pass thread does; exposed for tests).
  MigrationPassResult runPass(const std::vector<protocol::Peer>& peers);

  // What the running (or last) pass has moved so far.
  MigrationPassProgress passProgress() const;

 private:
  // A plugin's progress report ({"block": id, "done": true, ...}), from any thread: a block of
  // the running pass that now has a verified copy elsewhere. Others are ignored.
  void pluginProgress(std::string_view progress_json);
  std::vector<BlockMeta> blocksToMigrate() const;

  EventSink& events_;
  BlockStore& store_;
  std::vector<std::unique_ptr<BlockMigrationPlugin>> plugins_;
  MigrationKinds kinds_;
  std::function<void()> on_begin_;
  std::atomic<bool> cancelled_{false};
  std::thread pass_thread_;
  mutable std::mutex pass_mutex_;
  std::condition_variable pass_ended_;
  bool pass_running_ = false;
  std::string plugin_in_call_;

  mutable std::mutex progress_mutex_;
  MigrationPassProgress progress_;
  std::map<std::string, std::uint64_t> pass_blocks_;  // id -> size, not yet reported moved
  std::function<void(MigrationPassProgress)> on_progress_;
};

}  // namespace dockhand::agent
