#include "dockhand/driver/block_map.h"

#include <algorithm>

namespace dockhand::driver {

void BlockMap::add(const protocol::BlockInfo& info) {
  BlockLocation& block = blocks_[info.id];
  block.id = info.id;
  block.size = info.size;
  if (!info.checksum.empty() || block.holders.empty()) block.checksum = info.checksum;
  block.holders[info.executor_id] = info.url;
}

bool BlockMap::removeHolder(const std::string& id, const std::string& holder) {
  auto it = blocks_.find(id);
  if (it == blocks_.end()) return false;
  it->second.holders.erase(holder);
  if (!it->second.holders.empty()) return false;
  blocks_.erase(it);
  return true;
}

std::vector<std::string> BlockMap::dropHolder(const std::string& holder) {
  return dropHolderExcept(holder, {});
}

std::vector<std::string> BlockMap::dropHolderExcept(const std::string& holder,
                                                    const std::set<std::string>& kept) {
  std::vector<std::string> gone;
  for (auto it = blocks_.begin(); it != blocks_.end();) {
    if (kept.count(it->first) == 0 && it->second.holders.erase(holder) > 0 &&
        it->second.holders.empty()) {
      gone.push_back(it->first);
      it = blocks_.erase(it);
    } else {
      ++it;
    }
  }
  return gone;
}

const BlockLocation* BlockMap::find(const std::string& id) const {
  auto it = blocks_.find(id);
  return it == blocks_.end() ? nullptr : &it->second;
}

std::size_t BlockMap::heldBy(const std::string& holder) const {
  return static_cast<std::size_t>(
      std::count_if(blocks_.begin(), blocks_.end(),
                    [&](const auto& entry) { return entry.second.holders.count(holder) > 0; }));
}

BlockMap::HolderCounts BlockMap::countByHolder() const {
  HolderCounts counts;
  for (const auto& [id, block] : blocks_) {
    for (const auto& [holder, location] : block.holders) {
      if (!holder.empty()) {
        ++counts.agents[holder];
      } else if (protocol::isExternalStoreUrl(location)) {
        ++counts.external;
      } else {
        ++counts.fallback;
      }
    }
  }
  return counts;
}

}  // namespace dockhand::driver
