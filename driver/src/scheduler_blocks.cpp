// The Scheduler's blocks (protocol.md 8.19, docs/driver.md "Blocks"): where each block
// lives, what runs again when one is lost or cannot be fetched, and the URL a task reads an
// input from. Called under the owner's mutex like the Scheduler's other members; see
// scheduler.h.
#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "dockhand/driver/scheduler.h"

namespace dockhand::driver {

// ---- blocks -------------------------------------------------------------------------------

void Scheduler::updateBlocks(const std::string& agent_id, const protocol::UpdateBlockInfo& update,
                             TimePoint now, Actions& out) {
  now_ = now;
  for (const auto& info : update.added) {
    // A holder the driver does not know could never be read from nor dropped.
    if (!info.executor_id.empty() && agents_.count(info.executor_id) == 0) continue;
    blocks_.add(info);
  }
  std::vector<std::string> gone;
  for (const auto& id : update.removed) {
    // An id both added and removed in one update moved away from the sender: it stays
    // wherever `added` put it.
    if (blocks_.removeHolder(id, agent_id)) gone.push_back(id);
  }
  onBlocksLost(gone, fmt::format("agent {} dropped it", agent_id));
  schedule(now, out);
}

void Scheduler::onBlocksLost(const std::vector<std::string>& ids, const std::string& why) {
  if (job_state_ != JobState::kRunning) return;
  std::vector<std::size_t> rerun;
  for (const auto& id : ids) {
    auto producer = producer_.find(id);
    if (producer == producer_.end()) continue;
    TaskRecord& p = tasks_[producer->second];
    if (p.outcome != TaskOutcome::kFinished) continue;  // it will write the block again
    auto readers = consumers_.find(id);
    if (readers == consumers_.end()) continue;
    const bool needed =
        std::any_of(readers->second.begin(), readers->second.end(),
                    [&](std::size_t c) { return tasks_[c].outcome != TaskOutcome::kFinished; });
    if (!needed) continue;
    sendBack(p, "FINISHED");
    p.reason = fmt::format("rerun: its block {} was lost ({})", id, why);
    --finished_;
    ++reruns_for_lost_blocks_;
    rerun.push_back(producer->second);
  }
  std::sort(rerun.begin(), rerun.end(), std::greater<>());
  for (const auto index : rerun) pending_.push_front(index);
}

bool Scheduler::onFetchFailed(std::size_t index, const std::string& reader,
                              const protocol::FetchFailure& failure, Actions& out) {
  TaskRecord& t = tasks_[index];
  ++fetch_failures_;
  const int times = ++t.fetch_failures[failure.block_id];
  bool lost = false;
  if (const BlockLocation* block = blocks_.find(failure.block_id)) {
    // The holder the launch read from: the one with that URL (an external store's too), else
    // the fallback store (read through an agent's block server, so its URL is no holder's).
    std::optional<std::string> holder;
    for (const auto& [id, url] : block->holders) {
      if (url == failure.url) holder = id;
    }
    if (!holder && block->holders.count("") > 0) holder = "";
    if (holder) lost = blocks_.removeHolder(failure.block_id, *holder);
  }
  if (times >= maxAttempts()) {
    setOutcome(t, TaskOutcome::kFailed);
    failJob(fmt::format("task '{}' could not fetch block {} {} time(s), the limit (last on {}: {})",
                        t.spec.name, failure.block_id, times, reader, t.reason),
            out);
    return false;
  }
  sendBack(t, "FAILED");
  pending_.push_front(index);
  if (lost) {
    onBlocksLost({failure.block_id},
                 fmt::format("task '{}' on {} could not fetch it", t.spec.name, reader));
  }
  return true;
}

const AgentInfo* Scheduler::fallbackReader(const AgentInfo* preferred) const {
  auto usable = [](const AgentInfo& a) { return takesTasks(a) && !a.block_url.empty(); };
  if (preferred != nullptr && usable(*preferred)) return preferred;
  for (const auto& [id, agent] : agents_) {
    if (usable(agent)) return &agent;
  }
  return nullptr;
}

bool Scheduler::inputsReady(const TaskSpec& spec) const {
  if (spec.inputs.empty()) return true;
  const AgentInfo* placeholder = nullptr;  // any agent taking tasks serves as the target here
  for (const auto& [id, agent] : agents_) {
    if (takesTasks(agent)) {
      placeholder = &agent;
      break;
    }
  }
  if (placeholder == nullptr) return false;
  for (const auto& id : spec.inputs) {
    const BlockLocation* block = blocks_.find(id);
    if (block == nullptr || inputUrl(*block, *placeholder).empty()) return false;
  }
  return true;
}

std::string Scheduler::inputUrl(const BlockLocation& block, const AgentInfo& target) const {
  // A decommissioning holder is about to leave: its blocks are read once they have moved
  // (to a peer or a store), or recomputed if they never do. A disconnected one may never come
  // back: its blocks are read once it has resumed. An agent's copy is read first, then an
  // external store's (readers GET it there), then the fallback store's.
  const std::string* on_active = nullptr;
  const std::string* out_of_agents = nullptr;  // the holder "": a store's URL or "fallback:<id>"
  for (const auto& [holder, url] : block.holders) {
    if (holder.empty()) {
      out_of_agents = &url;
      continue;
    }
    auto agent = agents_.find(holder);
    if (agent == agents_.end() || agent->second.state == AgentState::kDecommissioning ||
        agent->second.disconnected_since) {
      continue;
    }
    if (on_active == nullptr || holder == target.id) on_active = &url;  // its own copy wins
  }
  if (on_active != nullptr) return *on_active;
  if (out_of_agents != nullptr && protocol::isExternalStoreUrl(*out_of_agents)) {
    return *out_of_agents;
  }
  if (out_of_agents != nullptr) {
    if (const AgentInfo* reader = fallbackReader(&target)) {
      std::string base = reader->block_url;
      while (!base.empty() && base.back() == '/') base.pop_back();
      return fmt::format("{}/blocks/{}", base, block.id);
    }
  }
  return {};
}

}  // namespace dockhand::driver
