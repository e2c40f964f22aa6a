// BlockMap: where each block lives, as the agents' UpdateBlockInfo frames tell it (after
// Spark's BlockManagerMaster). A block has one or more holders, each an executor id or "" for
// a store out of the agents (the fallback store, or an external one at an http(s) URL), each
// with the URL a reader GETs the block from. A block whose last
// holder goes is erased, and the call that erased it returns its id, so that the caller can
// rerun what produced it.
//
// Pure bookkeeping: it does not know the agents, nor which holder can be read from now (a
// decommissioning agent cannot); that is the Scheduler's business, which owns the one
// BlockMap of the driver. Not thread-safe: the Scheduler's owner (DriverService) serializes
// calls with its own mutex.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "dockhand/protocol/messages.h"

namespace dockhand::driver {

// Where one block lives: holder executor id -> the URL a reader GETs it from. The holder ""
// is a store out of the agents: an external store when its URL is http(s)
// (protocol::isExternalStoreUrl), read there; else the fallback store (URL "fallback:<id>"),
// read through any agent's block server.
struct BlockLocation {
  std::string id;
  std::uint64_t size = 0;
  std::string checksum;
  std::map<std::string, std::string> holders;
};

class BlockMap {
 public:
  // info.executor_id holds block info.id at info.url (a new holder, or a new URL for a known
  // one). The size is the latest told; the checksum too, unless the latest holder told none
  // of a block already known.
  void add(const protocol::BlockInfo& info);
  // `holder` no longer holds block `id`. True when it was the block's last holder: the block
  // is erased. False for an unknown block.
  bool removeHolder(const std::string& id, const std::string& holder);
  // Drops `holder` from every block; returns the blocks left with no holder (now erased),
  // in id order.
  std::vector<std::string> dropHolder(const std::string& holder);
  // Drops `holder` from every block but those in `kept` (a resumed agent's own list of what it
  // holds); returns the blocks left with no holder (now erased), in id order.
  std::vector<std::string> dropHolderExcept(const std::string& holder,
                                            const std::set<std::string>& kept);

  // The block, or nullptr when no holder has it.
  const BlockLocation* find(const std::string& id) const;
  // The block; throws std::out_of_range when no holder has it.
  const BlockLocation& at(const std::string& id) const { return blocks_.at(id); }
  // Blocks that have `holder` among their holders ("" = the fallback store).
  std::size_t heldBy(const std::string& holder) const;
  // heldBy() of every holder at once, in one pass: for listings of every agent.
  struct HolderCounts {
    std::map<std::string, std::size_t> agents;  // holders of no block are absent
    std::size_t fallback = 0;                   // blocks in the fallback store
    std::size_t external = 0;                   // blocks in an external store
    std::size_t of(const std::string& agent) const {
      auto it = agents.find(agent);
      return it == agents.end() ? 0 : it->second;
    }
  };
  HolderCounts countByHolder() const;
  std::size_t size() const { return blocks_.size(); }
  bool empty() const { return blocks_.empty(); }

 private:
  std::map<std::string, BlockLocation> blocks_;  // by block id; none without a holder
};

}  // namespace dockhand::driver
