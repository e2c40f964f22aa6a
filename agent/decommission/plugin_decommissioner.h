// PluginDecommissioner: the Decommissioner port over block-migration plugins.
//
// A pass runs on a thread of its own: it takes the blocks of the kinds to migrate that the
// store holds, hands them to the first plugin in the configured order (with the peers the
// Backend got from the driver), then what that plugin could not move to the next one, and so
// on ("peer" first, "fallback" for the rest). A plugin reports a block migrated only once a
// complete, verified copy exists at the destination; the agent announces it only where a
// reader can get it (migrate_answer.h). The result is posted to the core
// thread; local copies are deleted only when the Backend calls release() after telling the
// driver where they went.
//
// The decommissioner creates its plugins itself, through the factory it is built with, so
// that their progress reports reach it from the start: the factory gets the callback to give
// each plugin (dh_host.migration_progress) and returns the plugins in pass order.
//
// Each migrate() goes through its plugin instance's calls (plugins/plugin_calls.h), unbounded
// there: the decommission deadline bounds a pass, and stopPass() the wait at exit.
//
// Lifetime: the EventSink and the store must outlive this object, which owns the plugins. A
// plugin may ignore cancel() and never return from migrate(): stopPass() stops the plugins'
// calls, waiting at most its grace, which releases the pass thread, and joins it; a plugin still
// in its call is left behind, not destroyed (plugin_instance.h), and the agent ends the process
// without destructors. The destructor does the same with plugin_call_timeout_ms as the grace.
#pragma once

#include <atomic>
#include <chrono>
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
#include "decommission/migrate_answer.h"
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
  // server from taking new blocks there. writes_in_flight counts the block writes (PUTs) that
  // were let in before that and have not ended: a pass that ends while one runs proves
  // nothing (the block may land after the pass looked). `readable` checks each place an
  // answer names before it is announced (migrate_answer.h; empty: not checked). Throws what
  // `make_plugins` throws.
  PluginDecommissioner(EventSink& events, BlockStore& store,
                       const MigrationPluginFactory& make_plugins, MigrationKinds kinds,
                       std::function<void()> on_begin,
                       std::function<std::size_t()> writes_in_flight = {},
                       ReadableCheck readable = {});
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

  // Cancels a running pass, stops the plugins' calls (waiting until `grace` has passed for a
  // migrate() in progress) and joins the pass thread. Returns the plugins whose migrate() did
  // not return by then (left behind); empty when every one did. Once only: later calls return
  // what the first did.
  std::vector<std::string> stopPass(std::chrono::milliseconds grace);

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
  std::function<std::size_t()> writes_in_flight_;
  ReadableCheck readable_;
  std::atomic<bool> cancelled_{false};
  std::thread pass_thread_;
  bool stopped_ = false;
  std::vector<std::string> left_in_call_;  // what stopPass() returned

  mutable std::mutex progress_mutex_;
  MigrationPassProgress progress_;
  std::map<std::string, std::uint64_t> pass_blocks_;  // id -> size, not yet reported moved
  std::function<void(MigrationPassProgress)> on_progress_;
};

}  // namespace dockhand::agent
