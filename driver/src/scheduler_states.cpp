// The Scheduler's three state machines, each written once: an agent's state, each task's
// outcome and the job's state, with the moves each allows (canMove) and the one function per
// machine that makes a move (setAgentState, setOutcome, setJobState). A move the table does not
// allow is a bug in the Scheduler: it is made anyway (the driver keeps serving), logged at
// error level and counted (illegalMoves(); the Scheduler's tests expect none).
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "dockhand/base/logging.h"
#include "dockhand/driver/scheduler.h"

namespace dockhand::driver {

std::string_view toString(TaskOutcome outcome) {
  switch (outcome) {
    case TaskOutcome::kPending:
      return "PENDING";
    case TaskOutcome::kRunning:
      return "RUNNING";
    case TaskOutcome::kFinished:
      return "FINISHED";
    case TaskOutcome::kFailed:
      return "FAILED";
    case TaskOutcome::kKilled:
      return "KILLED";
    case TaskOutcome::kCancelled:
      return "CANCELLED";
  }
  return "?";
}

std::string_view toString(JobState state) {
  switch (state) {
    case JobState::kNone:
      return "NONE";
    case JobState::kRunning:
      return "RUNNING";
    case JobState::kSucceeded:
      return "SUCCEEDED";
    case JobState::kFailed:
      return "FAILED";
  }
  return "?";
}

std::string_view toString(AgentState state) {
  switch (state) {
    case AgentState::kRegistered:
      return "registered";
    case AgentState::kActive:
      return "active";
    case AgentState::kDecommissioning:
      return "decommissioning";
  }
  return "?";
}

bool canMove(AgentState from, AgentState to) {
  switch (to) {
    case AgentState::kRegistered:
      return false;  // where a registration starts, never moved to
    case AgentState::kActive:
      return from == AgentState::kRegistered;  // LaunchedExecutor, or a resume
    case AgentState::kDecommissioning:
      return from != AgentState::kDecommissioning;
  }
  return false;
}

bool canMove(TaskOutcome from, TaskOutcome to) {
  switch (to) {
    case TaskOutcome::kPending:
      // Retried (a failed, killed or lost attempt, a failed fetch), or a finished map task run
      // again because a block it wrote was lost.
      return from == TaskOutcome::kRunning || from == TaskOutcome::kFinished;
    case TaskOutcome::kRunning:
      return from == TaskOutcome::kPending;
    case TaskOutcome::kFinished:
      // Its agent said so; or a task the failed job was killing finished first.
      return from == TaskOutcome::kRunning || from == TaskOutcome::kKilled;
    case TaskOutcome::kFailed:  // out of attempts
    case TaskOutcome::kKilled:  // the job failed while it ran
      return from == TaskOutcome::kRunning;
    case TaskOutcome::kCancelled:
      return from == TaskOutcome::kPending;  // the job failed before it ran
  }
  return false;
}

bool canMove(JobState from, JobState to) {
  switch (to) {
    case JobState::kNone:
      return false;
    case JobState::kRunning:
      return from != JobState::kRunning;  // submit: the previous job is over
    case JobState::kSucceeded:
    case JobState::kFailed:
      return from == JobState::kRunning;
  }
  return false;
}

void Scheduler::noteIllegalMove(std::string_view machine, const std::string& who,
                                std::string_view from, std::string_view to) {
  ++illegal_moves_;
  logger("driver")->error(
      "scheduler: {} {} moved from {} to {}, which its state machine does not "
      "allow (a bug; the driver goes on)",
      machine, who, from, to);
}

void Scheduler::setAgentState(AgentInfo& agent, AgentState to) {
  if (!canMove(agent.state, to)) {
    noteIllegalMove("agent", agent.id, toString(agent.state), toString(to));
  }
  agent.state = to;
}

void Scheduler::setOutcome(TaskRecord& task, TaskOutcome to) {
  if (!canMove(task.outcome, to)) {
    noteIllegalMove("task", "'" + task.spec.name + "'", toString(task.outcome), toString(to));
  }
  task.outcome = to;
}

void Scheduler::sendBack(TaskRecord& task, std::string_view ended_as) {
  if (task.launches > 0) {
    if (task.earlier.size() >= kMaxEarlierAttempts) task.earlier.erase(task.earlier.begin());
    task.earlier.push_back(
        EarlierAttempt{.task_id = task.task_id,
                       .agent_id = task.agent_id,
                       .launched_at = task.launched_at,
                       .duration = task.outcome == TaskOutcome::kRunning
                                       ? std::chrono::duration_cast<Millis>(now_ - task.launched_at)
                                       : task.duration,
                       .state = std::string(ended_as)});
  }
  setOutcome(task, TaskOutcome::kPending);
  task.pending_since = now_;
}

void Scheduler::setJobState(JobState to) {
  if (!canMove(job_state_, to)) {
    noteIllegalMove("job", "'" + job_.name + "'", toString(job_state_), toString(to));
  }
  job_state_ = to;
}

}  // namespace dockhand::driver
