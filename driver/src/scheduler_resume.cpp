// The Scheduler's side of agents that go away and may come back (protocol.md 6.4 to 6.6):
// expiry of silent agents, holding an agent that registered with `resumes` while its
// connection is down, its ResumeExecutor within the grace window, and its loss past it. Called
// under the owner's mutex like the Scheduler's other members; see scheduler.h.
#include <algorithm>
#include <set>

#include <fmt/format.h>

#include "dockhand/driver/scheduler.h"

namespace dockhand::driver {

std::string_view reportedState(const AgentInfo& agent) {
  return agent.disconnected_since ? kDisconnectedState : toString(agent.state);
}

std::vector<std::string> Scheduler::expireSilentAgents(TimePoint now, Actions& out) {
  now_ = now;
  std::vector<std::string> expired;
  for (const auto& [id, agent] : agents_) {
    // A held agent has no connection to be silent on: the grace window judges it.
    if (agent.disconnected_since) continue;
    if (now - agent.last_seen > options_.agent_timeout) expired.push_back(id);
  }
  for (const auto& id : expired) {
    std::string reason =
        fmt::format("no message for more than {} ms", options_.agent_timeout.count());
    // The agent closes a silent link too and comes back (6.6): one that resumes is held like
    // one whose connection dropped. Its connection is closed either way.
    if (!disconnectAgent(id, reason, now, out)) removeAgent(id, reason, out);
    Action drop;
    drop.kind = Action::Kind::kDisconnect;
    drop.agent_id = id;
    drop.reason = std::move(reason);
    out.push_back(std::move(drop));
  }
  return expired;
}

bool Scheduler::disconnectAgent(const std::string& agent_id, const std::string& reason,
                                TimePoint now, Actions& out) {
  now_ = now;
  auto it = agents_.find(agent_id);
  if (it == agents_.end() || !it->second.resumes || options_.reconnect_grace <= Millis(0)) {
    return false;
  }
  AgentInfo& agent = it->second;
  if (agent.disconnected_since) return true;  // held already
  // Out of placement; its running tasks keep their cores and addresses, so that a resume
  // finds the agent's accounting as it left it.
  if (takesTasks(agent)) total_free_cores_ -= agent.free_cores;
  unindexAgent(agent);
  agent.disconnected_since = now;
  agent.disconnect_reason = reason;
  // Nothing can start because an agent went away: no scheduling pass.
  (void)out;
  return true;
}

Result<protocol::ResumeAccepted> Scheduler::resumeAgent(const protocol::ResumeExecutor& resume,
                                                        TimePoint now, Actions& out) {
  now_ = now;
  auto it = agents_.find(resume.executor_id);
  if (it == agents_.end()) {
    return Error(fmt::format("executor '{}' is not held by this driver: it never registered "
                             "here, it was lost (not back within {} ms), or the driver "
                             "restarted; its tasks are not counted here any more",
                             resume.executor_id, options_.reconnect_grace.count()),
                 std::string(protocol::error_code::kNotResumable));
  }
  AgentInfo& agent = it->second;
  if (!agent.disconnected_since) {
    return Error(fmt::format("executor '{}' is still connected (host {}); only an agent whose "
                             "connection dropped can resume",
                             resume.executor_id, agent.host),
                 std::string(protocol::error_code::kNotResumable));
  }
  agent.disconnected_since.reset();
  agent.disconnect_reason.clear();
  agent.last_seen = now;
  // Only an agent whose executor is up resumes (6.6): it takes tasks at once, as after
  // LaunchedExecutor.
  if (agent.state == AgentState::kRegistered) setAgentState(agent, AgentState::kActive);
  if (takesTasks(agent)) {
    total_free_cores_ += agent.free_cores;
    indexAgent(agent);
  }

  // Its list is the truth: what it holds is recorded (again), what it no longer lists is gone.
  std::set<std::string> listed;
  for (const auto& info : resume.blocks) {
    if (info.executor_id != agent.id) continue;  // another holder reports its own copies
    blocks_.add(info);
    listed.insert(info.id);
  }
  const std::vector<std::string> gone = blocks_.dropHolderExcept(agent.id, listed);
  onBlocksLost(gone, fmt::format("agent {} came back without it", agent.id));

  protocol::ResumeAccepted accepted;
  for (const auto& [task_id, run] : running_) {
    if (run.agent_id == agent.id) accepted.tasks.push_back(task_id);
  }
  std::sort(accepted.tasks.begin(), accepted.tasks.end());
  // A KillTask queued while it was away went nowhere: send it again.
  for (const auto task_id : accepted.tasks) {
    const RunningTask& run = running_.at(task_id);
    if (!run.kill_requested) continue;
    Action kill;
    kill.kind = Action::Kind::kKill;
    kill.agent_id = agent.id;
    kill.task_id = task_id;
    kill.reason = run.kill_reason;
    out.push_back(std::move(kill));
  }
  schedule(now, out);
  return accepted;
}

std::optional<TimePoint> Scheduler::nextExpiry() const {
  std::optional<TimePoint> first;
  for (const auto& [id, agent] : agents_) {
    const TimePoint due = agent.disconnected_since
                              ? *agent.disconnected_since + options_.reconnect_grace
                              : agent.last_seen + options_.agent_timeout;
    if (!first || due < *first) first = due;
  }
  if (first) *first += Millis(1);  // both expire strictly past their bound
  return first;
}

std::vector<std::string> Scheduler::expireDisconnected(TimePoint now, Actions& out) {
  now_ = now;
  std::vector<std::string> expired;
  for (const auto& [id, agent] : agents_) {
    if (agent.disconnected_since && now - *agent.disconnected_since > options_.reconnect_grace) {
      expired.push_back(id);
    }
  }
  for (const auto& id : expired) {
    removeAgent(id, fmt::format("not back within {} ms", options_.reconnect_grace.count()), out);
  }
  return expired;
}

}  // namespace dockhand::driver
