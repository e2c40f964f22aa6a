// The migrate answer's "migrated" items (plugin.h, docs/plugins.md §5): where each block now
// lives, as the driver will be told, and whether a reader could get it there. One rule for the
// agent's decommission and for `dockhand plugins check`.
//
// An item names one of three places:
//   {"id", "executor_id": "<peer>"}   a peer agent the plugin was offered; readers GET it from
//                                     that agent's block server
//   {"id", "url": "http(s)://..."}    an external store; readers GET that URL
//   {"id"} (no executor_id, no url)   the cluster's shared fallback store; readers GET it from
//                                     any agent's block server, which reads its fallback_dir
// "location" is for people (logs, progress) and decides nothing.
#pragma once

#include <chrono>
#include <filesystem>
#include <functional>
#include <set>
#include <string>

#include <Poco/Net/Context.h>

#include "dockhand/base/result.h"
#include "dockhand/protocol/auth.h"
#include "dockhand/protocol/envelope.h"
#include "dockhand/protocol/messages.h"

namespace dockhand::agent {

// Whether a reader could get a block where a BlockInfo puts it; empty = not checked.
using ReadableCheck = std::function<Result<void>(const protocol::BlockInfo&)>;

// The block `block` (id, size, checksum as stored here) as one answer item places it, or why it
// cannot be announced: the item names an agent not in `offered`, both an agent and a URL, a
// URL that is no http(s) one, or a place `readable` refuses. The reason is one line, naming the
// place.
Result<protocol::BlockInfo> migratedBlock(const protocol::Json& item,
                                          const protocol::BlockInfo& block,
                                          const std::set<std::string>& offered,
                                          const ReadableCheck& readable);

// The check the agent makes: an external store's URL answers a HEAD with the block's size (the
// same URL rule, signer and TLS as a reader's fetch); a fallback block is in `fallback_dir`
// with its size (not checked when this agent has no fallback_dir: the store is then the
// plugin's own directory, which other agents serve); a peer holds what it verified on its PUT.
ReadableCheck readersCanGet(std::filesystem::path fallback_dir, std::chrono::milliseconds timeout,
                            protocol::auth::RequestSigner signer, Poco::Net::Context::Ptr tls);

}  // namespace dockhand::agent
