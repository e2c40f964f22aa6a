#include "dockhand/driver/driver_metrics.h"

#include <map>

namespace dockhand::driver {
namespace {

constexpr std::array<AgentState, 3> kAgentStates = {AgentState::kRegistered, AgentState::kActive,
                                                    AgentState::kDecommissioning};
constexpr std::array<TaskOutcome, 6> kOutcomes = {TaskOutcome::kPending,  TaskOutcome::kRunning,
                                                  TaskOutcome::kFinished, TaskOutcome::kFailed,
                                                  TaskOutcome::kKilled,   TaskOutcome::kCancelled};

}  // namespace

DriverMetrics::DriverMetrics(metrics::Registry& registry)
    : heartbeats_(
          registry.counter("dockhand_driver_heartbeats_total", "Heartbeats received from agents.")
              .get()),
      frames_(registry
                  .counter("dockhand_driver_frames_received_total",
                           "Protocol frames received from agents.")
                  .get()),
      bad_frames_(registry
                      .counter("dockhand_driver_frame_errors_total",
                               "Frames from agents that were answered with an error (malformed, "
                               "unexpected, refused).")
                      .get()),
      auth_failures_(registry
                         .counter("dockhand_driver_auth_failures_total",
                                  "Agent handshakes and control requests refused for "
                                  "authentication.")
                         .get()),
      registrations_(registry
                         .counter("dockhand_driver_registrations_total",
                                  "Agents whose RegisterExecutor was accepted.")
                         .get()),
      refused_registrations_(registry
                                 .counter("dockhand_driver_registrations_refused_total",
                                          "RegisterExecutor asks that were refused.")
                                 .get()),
      agents_lost_(registry
                       .counter("dockhand_driver_agents_lost_total",
                                "Agents lost without saying goodbye (connection closed or silent "
                                "past agent_timeout_ms; one that resumes: not back within "
                                "agent_reconnect_grace_ms).")
                       .get()),
      launches_(registry
                    .counter("dockhand_driver_task_launches_total",
                             "LaunchTask frames the scheduler decided (every attempt).")
                    .get()),
      launches_ahead_(registry
                          .counter("dockhand_driver_task_launches_ahead_total",
                                   "Of those, the ones sent beyond their agent's free cores "
                                   "(launch_ahead): each waited there for a core.")
                          .get()),
      recalled_(registry
                    .counter("dockhand_driver_tasks_recalled_total",
                             "Tasks sent ahead that were recalled before they started, to "
                             "run on a free core of another agent (no attempt counted).")
                    .get()),
      scheduling_latency_(registry
                              .histogram("dockhand_driver_scheduling_latency_seconds",
                                         "Time a task waited, from becoming pending (submitted "
                                         "or sent back for another attempt) to its launch.",
                                         {}, metrics::durationBuckets())
                              .get()),
      control_requests_(registry.counter("dockhand_driver_control_requests_total",
                                         "Control API requests (/v1/...), by method and status.",
                                         {"method", "code"})),
      dropped_(registry.counter("dockhand_driver_connections_dropped_total",
                                "Agent connections the driver dropped for how they behaved, by "
                                "reason: frame_too_large, stopped_reading (queue bound or no "
                                "write progress for 30 s), no_hello, bad_websocket.",
                                {"reason"})),
      agents_(registry.gauge("dockhand_driver_agents",
                             "Registered agents, by state (disconnected: held for its grace "
                             "window).",
                             {"state"})),
      tasks_(registry.gauge("dockhand_driver_tasks",
                            "Tasks of the current (or last) job, by state.", {"state"})),
      agent_memory_(registry.gauge(
          "dockhand_driver_agent_memory_bytes",
          "Resident memory each agent reported in its latest heartbeat: of its own process "
          "(of=\"agent\"), of the processes it started now (of=\"tasks\"), and their most "
          "since the heartbeat before (of=\"tasks_peak\").",
          {"agent", "of"})),
      agent_block_bytes_(registry.gauge("dockhand_driver_agent_block_bytes",
                                        "Bytes of the blocks each agent reported holding in its "
                                        "latest heartbeat.",
                                        {"agent"})),
      agent_threads_(registry.gauge("dockhand_driver_agent_threads",
                                    "Threads of each agent's process, as its latest heartbeat "
                                    "reported them.",
                                    {"agent"})) {
  auto& ends =
      registry.counter("dockhand_driver_task_ends_total",
                       "Final task status updates the scheduler took, by state.", {"state"});
  for (auto state : {protocol::TaskState::kFinished, protocol::TaskState::kFailed,
                     protocol::TaskState::kKilled, protocol::TaskState::kLost}) {
    task_ends_[static_cast<std::size_t>(state)] =
        &ends.labels({std::string(protocol::toString(state))});
  }
  for (AgentState state : kAgentStates) agents_.labels({std::string(toString(state))});
  agents_.labels({std::string(kDisconnectedState)});
  for (TaskOutcome outcome : kOutcomes) tasks_.labels({std::string(toString(outcome))});
}

void DriverMetrics::taskStatus(protocol::TaskState state) {
  if (!protocol::isTerminal(state)) return;
  task_ends_[static_cast<std::size_t>(state)]->inc();
}

void DriverMetrics::recalled() { recalled_.inc(); }

void DriverMetrics::launched(SteadyClock::duration waited, bool ahead) {
  launches_.inc();
  if (ahead) launches_ahead_.inc();
  scheduling_latency_.observe(std::chrono::duration<double>(waited).count());
}

void DriverMetrics::controlRequest(const std::string& method, int status) {
  control_requests_.labels({method, std::to_string(status)}).inc();
}

void DriverMetrics::connectionDropped(DropReason reason) {
  dropped_.labels({std::string(toString(reason))}).inc();
}

void DriverMetrics::setGauges(const Scheduler& scheduler) {
  std::map<std::string_view, int> agents;
  for (const auto& [id, agent] : scheduler.agents()) ++agents[reportedState(agent)];
  for (AgentState state : kAgentStates) {
    agents_.labels({std::string(toString(state))}).set(agents[toString(state)]);
  }
  agents_.labels({std::string(kDisconnectedState)}).set(agents[kDisconnectedState]);
  std::map<TaskOutcome, int> tasks;
  for (const TaskRecord& task : scheduler.tasks()) ++tasks[task.outcome];
  for (TaskOutcome outcome : kOutcomes) {
    tasks_.labels({std::string(toString(outcome))}).set(tasks[outcome]);
  }
  agent_memory_.clear();
  agent_block_bytes_.clear();
  agent_threads_.clear();
  for (const auto& [id, agent] : scheduler.agents()) {
    const auto& m = agent.metrics;
    for (const auto& [of, value] :
         {std::pair{"agent", m.rss_bytes}, std::pair{"tasks", m.tasks_rss_bytes},
          std::pair{"tasks_peak", m.peak_tasks_rss_bytes}}) {
      if (value) agent_memory_.labels({id, of}).set(static_cast<double>(*value));
    }
    if (m.block_bytes) agent_block_bytes_.labels({id}).set(static_cast<double>(*m.block_bytes));
    if (m.threads) agent_threads_.labels({id}).set(static_cast<double>(*m.threads));
  }
}

}  // namespace dockhand::driver
