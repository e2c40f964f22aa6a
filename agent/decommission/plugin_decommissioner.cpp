#include "decommission/plugin_decommissioner.h"

#include <algorithm>
#include <map>
#include <set>

#include "dockhand/base/logging.h"
#include "dockhand/base/thread_name.h"

namespace dockhand::agent {

bool MigrationKinds::includes(BlockKind kind) const {
  switch (kind) {
    case BlockKind::kShuffle:
      return shuffle;
    case BlockKind::kRdd:
      return rdd;
    case BlockKind::kTask:
      return task;
  }
  return false;
}

PluginDecommissioner::PluginDecommissioner(EventSink& events, BlockStore& store,
                                           const MigrationPluginFactory& make_plugins,
                                           MigrationKinds kinds, std::function<void()> on_begin,
                                           std::function<std::size_t()> writes_in_flight,
                                           ReadableCheck readable)
    : events_(events),
      store_(store),
      kinds_(kinds),
      on_begin_(std::move(on_begin)),
      writes_in_flight_(std::move(writes_in_flight)),
      readable_(std::move(readable)) {
  plugins_ = make_plugins([this](std::string_view progress) { pluginProgress(progress); });
}

PluginDecommissioner::~PluginDecommissioner() {
  std::chrono::milliseconds grace(0);
  for (auto& plugin : plugins_) grace = std::max(grace, plugin->instance().calls().timeout());
  stopPass(grace);
}

void PluginDecommissioner::begin() {
  if (on_begin_) on_begin_();
}

void PluginDecommissioner::startPass(std::vector<protocol::Peer> peers,
                                     std::function<void(MigrationPassProgress)> progress,
                                     std::function<void(MigrationPassResult)> done) {
  // One pass at a time: the previous one has posted its result, so its thread is ending.
  if (pass_thread_.joinable()) pass_thread_.join();
  {
    std::lock_guard lock(progress_mutex_);
    on_progress_ = std::move(progress);
  }
  pass_thread_ = std::thread([this, peers = std::move(peers), done = std::move(done)]() mutable {
    nameThisThread("dh-migrate");
    MigrationPassResult result;
    try {
      result = runPass(peers);
    } catch (const std::exception& e) {
      logger("decommission")->error("migration pass failed: {}", e.what());
      result.complete = false;
    }
    events_.post([done = std::move(done), result = std::move(result)]() mutable {
      done(std::move(result));
    });
  });
}

std::vector<BlockMeta> PluginDecommissioner::blocksToMigrate() const {
  std::vector<BlockMeta> out;
  for (auto& meta : store_.list()) {
    auto kind = parseBlockId(meta.id);
    if (kind && kinds_.includes(*kind)) out.push_back(std::move(meta));
  }
  return out;
}

MigrationPassResult PluginDecommissioner::runPass(const std::vector<protocol::Peer>& peers) {
  MigrationPassResult result;
  std::map<std::string, BlockMeta> remaining;
  for (auto& meta : blocksToMigrate()) remaining.emplace(meta.id, std::move(meta));
  std::map<std::string, std::string> reasons;
  {
    std::lock_guard lock(progress_mutex_);
    progress_ = MigrationPassProgress{};
    pass_blocks_.clear();
    for (const auto& [id, meta] : remaining) {
      pass_blocks_.emplace(id, meta.size);
      ++progress_.blocks_total;
      progress_.bytes_total += meta.size;
    }
    if (on_progress_) {
      events_.post([report = on_progress_, now = progress_] { report(now); });
    }
  }
  Json peer_list = protocol::toJson(peers)["peers"];
  std::set<std::string> offered;  // the only agents an answer may name (migrate_answer.h)
  for (const auto& peer : peers) offered.insert(peer.executor_id);
  for (auto& plugin : plugins_) {
    if (remaining.empty() || cancelled_) break;
    Json blocks = Json::array();
    for (const auto& [id, meta] : remaining) {
      blocks.push_back(Json{{"id", id},
                            {"path", store_.pathOf(id).string()},
                            {"size", meta.size},
                            {"checksum", meta.checksum}});
    }
    Json request{{"blocks", std::move(blocks)}, {"peers", peer_list}};
    logger("decommission")->info("{}: migrating {} block(s)", plugin->name(), remaining.size());
    PluginResult answer = plugin->migrate(request.dump());
    if (!answer.ok()) {
      logger("decommission")->warn("{}: migration failed: {}", plugin->name(), answer.error);
      for (const auto& [id, meta] : remaining) reasons[id] = plugin->name() + ": " + answer.error;
      continue;
    }
    Json out = Json::parse(answer.json, nullptr, /*allow_exceptions=*/false);
    if (!out.is_object()) {
      logger("decommission")->warn("{}: migrate returned malformed JSON", plugin->name());
      continue;
    }
    if (auto it = out.find("migrated"); it != out.end() && it->is_array()) {
      for (const auto& item : *it) {
        if (!item.is_object() || !item.contains("id") || !item["id"].is_string()) continue;
        auto found = remaining.find(item["id"].get<std::string>());
        if (found == remaining.end()) continue;
        protocol::BlockInfo stored;
        stored.id = found->first;
        stored.size = found->second.size;
        stored.checksum = found->second.checksum;
        auto info = migratedBlock(item, stored, offered, readable_);
        if (!info) {
          // Not announced: the driver would send readers where they cannot get it.
          std::string why = plugin->name() + ": " + info.error().message + "; the block stays here";
          logger("decommission")->warn("block {}: {}", stored.id, why);
          reasons[stored.id] = std::move(why);
          continue;
        }
        result.bytes_moved += info->size;
        result.moved.push_back(std::move(*info));
        reasons.erase(found->first);
        remaining.erase(found);
      }
    }
    if (auto it = out.find("failed"); it != out.end() && it->is_array()) {
      for (const auto& item : *it) {
        if (!item.is_object() || !item.contains("id") || !item["id"].is_string()) continue;
        std::string id = item["id"].get<std::string>();
        if (remaining.count(id) != 0) {
          reasons[id] = plugin->name() + ": " + item.value("reason", std::string("failed"));
        }
      }
    }
  }
  for (const auto& [id, meta] : remaining) {
    auto why = reasons.find(id);
    result.failed.emplace_back(id, why != reasons.end() ? why->second
                                   : cancelled_         ? std::string("cancelled")
                                                        : std::string("no plugin moved it"));
  }
  // A write let in before the server stopped taking blocks may still land: asked first, so
  // that one that ends now is seen by the count of what is left below.
  const bool writes_done = !writes_in_flight_ || writes_in_flight_() == 0;
  std::set<std::string> moved;
  for (const auto& info : result.moved) moved.insert(info.id);
  for (const auto& meta : blocksToMigrate()) {
    if (moved.count(meta.id) != 0) continue;
    ++result.blocks_left;
    result.bytes_left += meta.size;
  }
  // Complete only when nothing is left here at all: a block that arrived during the pass (a
  // peer's migration, let in just before this agent stopped taking blocks) needs another one.
  result.complete = remaining.empty() && !cancelled_ && result.blocks_left == 0 && writes_done;
  return result;
}

void PluginDecommissioner::pluginProgress(std::string_view progress_json) {
  Json report = Json::parse(progress_json, nullptr, /*allow_exceptions=*/false);
  if (!report.is_object() || !report.value("done", false)) return;
  auto block = report.find("block");
  if (block == report.end() || !block->is_string()) return;
  std::lock_guard lock(progress_mutex_);
  auto found = pass_blocks_.find(block->get<std::string>());
  if (found == pass_blocks_.end()) return;  // not this pass's, or reported already
  ++progress_.blocks_moved;
  progress_.bytes_moved += found->second;
  pass_blocks_.erase(found);
  if (on_progress_) events_.post([report = on_progress_, now = progress_] { report(now); });
}

MigrationPassProgress PluginDecommissioner::passProgress() const {
  std::lock_guard lock(progress_mutex_);
  return progress_;
}

void PluginDecommissioner::release(const std::vector<std::string>& block_ids) {
  for (const auto& id : block_ids) {
    try {
      store_.removeLater(id);  // the core thread calls this: no waiting for the disk
    } catch (const BlockStoreError& e) {
      logger("decommission")->warn("cannot delete migrated block {}: {}", id, e.what());
    }
  }
}

std::vector<std::string> PluginDecommissioner::blocksLeft() const {
  std::vector<std::string> out;
  for (const auto& meta : blocksToMigrate()) out.push_back(meta.id);
  return out;
}

std::vector<std::string> PluginDecommissioner::stopPass(std::chrono::milliseconds grace) {
  if (stopped_) return left_in_call_;
  stopped_ = true;
  cancel();
  const auto deadline = std::chrono::steady_clock::now() + grace;
  for (auto& plugin : plugins_) {
    // A migrate() that ignores cancel() is answered "abandoned" here at the deadline, so the
    // pass thread goes on (and makes no other call: the calls are stopped).
    if (!plugin->instance().calls().stop(deadline)) left_in_call_.push_back(plugin->name());
  }
  if (pass_thread_.joinable()) pass_thread_.join();
  return left_in_call_;
}

void PluginDecommissioner::cancel() {
  cancelled_ = true;
  for (auto& plugin : plugins_) plugin->cancel();
}

}  // namespace dockhand::agent
