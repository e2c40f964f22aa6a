// The Scheduler's placement: which agent a pending task goes to (fits, pickAgent, the
// scheduling pass), what a launch takes from it (cores, resource addresses or shares of them,
// the URLs of its inputs), what a finished launch gives back, and how many tasks are sent
// ahead of free cores (launch_ahead). Called under the owner's
// mutex from the Scheduler's other members; see scheduler.h.
#include "dockhand/driver/scheduler.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "dockhand/base/logging.h"

namespace dockhand::driver {

std::int64_t resourceUnitsPerAddress(double amount) {
  if (amount >= 1) return kResourceUnits;
  // floor(1 / amount) tasks share an address; the epsilon keeps 1 / 0.2 at 5, not 4.999...
  const auto shares = static_cast<std::int64_t>(std::floor(1.0 / amount + 1e-9));
  return kResourceUnits / std::max<std::int64_t>(1, shares);
}

int resourceAddressCount(double amount) {
  return amount >= 1 ? static_cast<int>(std::llround(amount)) : 1;
}

// ---- placement ----------------------------------------------------------------------------

bool Scheduler::fits(const TaskSpec& spec, const AgentInfo& agent) const {
  if (!takesTasks(agent) || agent.free_cores < spec.cpus) return false;
  // Never more than the agent has, launch_ahead or not: such a task fits nowhere.
  if (spec.cpus > agent.cores) return false;
  for (const auto& [name, amount] : spec.resources) {
    auto it = agent.free_units.find(name);
    if (it == agent.free_units.end()) return false;
    const std::int64_t units = resourceUnitsPerAddress(amount);
    const auto usable = std::count_if(it->second.begin(), it->second.end(),
                                      [&](std::int64_t free) { return free >= units; });
    if (usable < resourceAddressCount(amount)) return false;
  }
  return true;
}

AgentInfo* Scheduler::pickAgent(const TaskSpec& spec) {
  // Spread: the fitting agent with the most free cores of its own (ties: the first by id); only
  // when none has enough, a place ahead (launch_ahead): the agent with the most free cores
  // counting those. Each index is in its order, so the first that fits is the one; past the
  // agents with enough cores none can.
  for (const auto* index : {&by_own_free_cores_, &by_free_cores_}) {
    for (const auto& [negative_free, id] : *index) {
      if (-negative_free < spec.cpus) break;
      AgentInfo& agent = agents_.at(id);
      if (fits(spec, agent)) return &agent;
    }
  }
  return nullptr;
}

void Scheduler::indexAgent(const AgentInfo& agent) {
  if (!takesTasks(agent)) return;
  by_free_cores_.emplace(-agent.free_cores, agent.id);
  by_own_free_cores_.emplace(agent.ahead - agent.free_cores, agent.id);
}

void Scheduler::unindexAgent(const AgentInfo& agent) {
  if (!takesTasks(agent)) return;
  by_free_cores_.erase({-agent.free_cores, agent.id});
  by_own_free_cores_.erase({agent.ahead - agent.free_cores, agent.id});
}

void Scheduler::schedule(TimePoint now, Actions& out) {
  if (job_state_ != JobState::kRunning) return;
  // Shapes (cpus + resources) that found no agent in this pass: a later task of the same
  // shape will not fit either, so the pass stays linear in the pending tasks.
  std::vector<const TaskSpec*> misfits;
  auto same_shape = [](const TaskSpec& a, const TaskSpec& b) {
    return a.cpus == b.cpus && a.resources == b.resources;
  };
  for (auto it = pending_.begin(); it != pending_.end() && total_free_cores_ > 0;) {
    const TaskSpec& spec = tasks_[*it].spec;
    if (!inputsReady(spec)) {
      ++it;  // waits for a block; UpdateBlockInfo or a producer's rerun brings it
      continue;
    }
    bool known_misfit = std::any_of(misfits.begin(), misfits.end(),
                                    [&](const TaskSpec* m) { return same_shape(*m, spec); });
    AgentInfo* agent = known_misfit ? nullptr : pickAgent(spec);
    if (agent == nullptr) {
      if (!known_misfit) misfits.push_back(&spec);
      ++it;
      continue;
    }
    std::size_t index = *it;
    it = pending_.erase(it);
    launch(index, *agent, now, out);
  }
  if (pending_.empty()) recallWaiting(out);
}

void Scheduler::launch(std::size_t index, AgentInfo& agent, TimePoint now, Actions& out) {
  TaskRecord& t = tasks_[index];
  Action action;
  action.kind = Action::Kind::kLaunch;
  action.agent_id = agent.id;
  protocol::TaskDescription& d = action.task;
  d.task_id = next_task_id_++;
  d.attempt = t.launches;
  d.name = t.spec.name;
  d.partition = t.spec.partition;
  d.runner = t.spec.runner;
  d.cpus = t.spec.cpus;
  d.properties = t.spec.properties;
  d.payload = t.spec.payload;
  for (const auto& id : t.spec.inputs) {
    const BlockLocation& block = blocks_.at(id);  // inputsReady() held
    d.inputs.push_back(protocol::InputBlock{.id = block.id,
                                            .url = inputUrl(block, agent),
                                            .size = block.size,
                                            .checksum = block.checksum});
  }
  std::map<std::string, std::int64_t> units_each;
  for (const auto& [name, amount] : t.spec.resources) {
    auto& free = agent.free_units[name];
    const auto& addresses = agent.resources[name];
    auto& assigned = d.resources[name];
    const std::int64_t units = resourceUnitsPerAddress(amount);
    const int count = resourceAddressCount(amount);
    // A fraction goes to the fullest address it still fits on, so shares pack together and
    // whole addresses stay free for whole-address tasks; whole addresses in registration
    // order.
    std::vector<std::size_t> order(free.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    if (units < kResourceUnits) {
      std::stable_sort(order.begin(), order.end(),
                       [&](std::size_t a, std::size_t b) { return free[a] < free[b]; });
    }
    for (std::size_t i : order) {
      if (static_cast<int>(assigned.size()) == count) break;
      if (free[i] < units) continue;
      free[i] -= units;
      assigned.push_back(addresses[i]);
    }
    units_each[name] = units;
  }
  action.ahead = agent.free_cores - agent.ahead < t.spec.cpus;
  unindexAgent(agent);
  agent.free_cores -= t.spec.cpus;
  indexAgent(agent);
  total_free_cores_ -= t.spec.cpus;
  ++agent.running;
  ++agent.tasks_launched;

  ++t.launches;
  setOutcome(t, TaskOutcome::kRunning);
  t.task_id = d.task_id;
  t.agent_id = agent.id;
  t.launched_at = now;
  action.waited = now - t.pending_since;

  RunningTask run;
  run.job_seq = job_seq_;
  run.index = index;
  run.agent_id = agent.id;
  run.cpus = t.spec.cpus;
  if (action.ahead) waiting_ahead_.insert(d.task_id);
  run.resources = d.resources;
  run.units_each = std::move(units_each);
  running_.emplace(d.task_id, std::move(run));
  out.push_back(std::move(action));
}

void Scheduler::release(const RunningTask& run) {
  auto it = agents_.find(run.agent_id);
  if (it == agents_.end()) return;
  AgentInfo& agent = it->second;
  unindexAgent(agent);
  agent.free_cores += run.cpus;
  indexAgent(agent);
  if (takesTasks(agent)) total_free_cores_ += run.cpus;
  if (agent.running > 0) --agent.running;
  for (const auto& [name, addresses] : run.resources) {
    auto& free = agent.free_units[name];
    const auto& registered = agent.resources[name];
    const std::int64_t units =
        run.units_each.count(name) ? run.units_each.at(name) : kResourceUnits;
    for (const auto& address : addresses) {
      auto at = std::find(registered.begin(), registered.end(), address);
      if (at == registered.end()) continue;
      auto& slot = free[static_cast<std::size_t>(at - registered.begin())];
      slot = std::min(kResourceUnits, slot + units);
    }
  }
}

// ---- launch_ahead ---------------------------------------------------------------------------

int Scheduler::aheadFor(const AgentInfo& agent) const {
  if (!agent.waits_for_cores) return 0;  // it would run whatever it is sent at once
  if (options_.launch_ahead != defaults::kLaunchAheadAuto) return options_.launch_ahead;
  return ahead_per_core_ * agent.cores;
}

void Scheduler::applyAhead(AgentInfo& agent) {
  const int ahead = aheadFor(agent);
  if (ahead == agent.ahead) return;
  // Tasks already sent stay where they are: with less ahead, free_cores may go below 0 until
  // enough of them end.
  unindexAgent(agent);
  if (takesTasks(agent)) total_free_cores_ += ahead - agent.ahead;
  agent.free_cores += ahead - agent.ahead;
  agent.ahead = ahead;
  indexAgent(agent);
}

void Scheduler::noteRunTime(const protocol::TaskMetrics& metrics) {
  if (options_.launch_ahead != defaults::kLaunchAheadAuto) return;
  if (!metrics.run_time_ms) return;  // not measured (an older agent, a lost task): no evidence
  const std::uint64_t ran_ms = *metrics.run_time_ms;
  short_in_a_row_ = ran_ms <= kShortTaskMs ? short_in_a_row_ + 1 : 0;
  sub_ms_in_a_row_ = ran_ms == 0 ? sub_ms_in_a_row_ + 1 : 0;
  const int per_core = sub_ms_in_a_row_ >= kProvenShortTasks  ? kSubMillisecondAheadPerCore
                       : short_in_a_row_ >= kProvenShortTasks ? 1
                                                              : 0;
  if (per_core == ahead_per_core_) return;
  if (per_core > 0) {
    logger("driver")->debug(
        "launch_ahead auto: the job's last {} tasks ran {}; each agent that waits for cores is "
        "sent {} times its cores' worth of tasks ahead",
        kProvenShortTasks,
        per_core == 1 ? fmt::format("{} ms or less", kShortTaskMs) : "under a millisecond",
        per_core);
  } else {
    logger("driver")->debug(
        "launch_ahead auto: a task ran {} ms; tasks go to free cores only until {} "
        "short ones in a row",
        ran_ms, kProvenShortTasks);
  }
  setAheadPerCore(per_core);
}

void Scheduler::setAheadPerCore(int per_core) {
  if (per_core == ahead_per_core_) return;
  ahead_per_core_ = per_core;
  for (auto& [id, agent] : agents_) applyAhead(agent);
}

void Scheduler::recallWaiting(Actions& out) {
  if (waiting_ahead_.empty()) return;
  // The agents with free cores of their own, the most first (by_own_free_cores_'s order), less
  // the cores that the tasks recalled already take once their KILLED comes.
  std::vector<std::pair<std::string, int>> idle;
  int promised = recalled_cores_;
  for (const auto& [negative_free, id] : by_own_free_cores_) {
    int free = -negative_free;
    if (free <= 0) break;
    const int used = std::min(free, promised);
    promised -= used;
    free -= used;
    if (free > 0) idle.emplace_back(id, free);
  }
  std::vector<std::uint64_t> done;  // recalled now, or no longer this job's to recall
  // The last sent first: they would start last.
  for (auto it = waiting_ahead_.rbegin(); it != waiting_ahead_.rend() && !idle.empty(); ++it) {
    RunningTask& run = running_.at(*it);
    if (run.job_seq != job_seq_ || run.kill_requested) {
      done.push_back(*it);
      continue;
    }
    const auto holder_idle = [&](const auto& entry) { return entry.first == run.agent_id; };
    if (!takesTasks(agents_.at(run.agent_id)) ||
        std::any_of(idle.begin(), idle.end(), holder_idle)) {
      continue;  // it starts where it is as soon as its agent takes tasks / frees a core
    }
    const TaskSpec& spec = tasks_[run.index].spec;
    auto to = std::find_if(idle.begin(), idle.end(), [&](const auto& entry) {
      return entry.second >= spec.cpus && fits(spec, agents_.at(entry.first));
    });
    if (to == idle.end()) continue;
    const std::string target = to->first;
    to->second -= spec.cpus;
    if (to->second <= 0) idle.erase(to);
    run.recalled = true;
    recalled_cores_ += run.cpus;
    ++recalled_;
    done.push_back(*it);
    Action kill;
    kill.kind = Action::Kind::kKill;
    kill.agent_id = run.agent_id;
    kill.task_id = *it;
    kill.recall = true;
    kill.reason = fmt::format(
        "recalled to run on a free core of agent '{}' (it waited here for a core)", target);
    out.push_back(std::move(kill));
  }
  for (std::uint64_t task_id : done) waiting_ahead_.erase(task_id);
}

void Scheduler::forgetRun(std::uint64_t task_id, const RunningTask& run) {
  waiting_ahead_.erase(task_id);
  if (run.recalled) recalled_cores_ -= run.cpus;
}

void Scheduler::resetAhead() {
  short_in_a_row_ = 0;
  sub_ms_in_a_row_ = 0;
  setAheadPerCore(0);
}

}  // namespace dockhand::driver
