// Agent: what changes while its process goes on. A reload (SIGHUP) reads the configuration
// again; a restart in place (SIGUSR2) leaves its next program the session file
// (agent_session.h) and the running tasks it hands over (docs/architecture.md, "Restarts").
#include <unistd.h>

#include <chrono>
#include <set>

#include "app/agent.h"
#include "app/agent_session.h"
#include "app/config_reload.h"
#include "app/systemd_notify.h"
#include "dockhand/base/log_format.h"
#include "dockhand/base/logging.h"
#include "executor/leftover_tasks.h"

namespace dockhand::agent {

bool Agent::takeUpSession() {
  auto log = logger("agent");
  const std::filesystem::path path = sessionPath(config_.work_dir);
  Result<std::optional<AgentSession>> read = readSession(path);
  if (read && !read->has_value()) return false;
  // A previous process of an agent on this work directory ended without ending its session:
  // what it ran is over (a service manager ended it with the process, or it is ended here),
  // but for the tasks it handed over to this program, when this program resumes its session.
  const bool resumes =
      read && sameSession(**read, config_.app_id, config_.executor_id, config_.driver_url);
  std::set<std::uint64_t> keep;
  if (resumes) {
    handed_over_ = (*read)->tasks;
    for (const auto& task : handed_over_) keep.insert(task.task_id);
  }
  for (const LeftoverTask& task : killLeftoverTasks(config_.work_dir, keep)) {
    log->warn(
        "killed process {} (process group {}) of task directory {}, left running by the "
        "agent's previous process",
        task.pid, task.pgid, task.directory);
  }
  if (!read) {
    log->error("{}; registering anew (the driver reruns what it counted here)",
               read.error().message);
    setSessionAside(path);
    return false;
  }
  const AgentSession& session = **read;
  if (!resumes) {
    log->info(
        "session file {} is of executor {} of app {} with driver {}, not this agent's: "
        "registering anew",
        path.string(), session.executor_id, session.app_id, session.driver_url);
    return false;
  }
  log->info(
      "executor {} was registered with driver {} by process {} (dockhand {}): resuming "
      "that session with the {} block(s) kept and {} task(s) handed over",
      session.executor_id, session.driver_url, session.pid, session.agent_version,
      store_ ? store_->count() : 0, handed_over_.size());
  return true;
}

std::vector<HandedOverTask> Agent::takeBackTasks() {
  auto log = logger("agent");
  std::vector<HandedOverTask> running;
  std::set<std::uint64_t> keep;
  for (auto& task : handed_over_) {
    const TaskLogScope scope(task.task_id);
    if (auto taken = guard_.adopt(task); !taken) {
      log->warn(
          "task {} could not be taken back from the previous program: {}; the driver runs "
          "it again",
          task.task_id, taken.error().message);
      continue;
    }
    keep.insert(task.task_id);
    running.push_back(std::move(task));
  }
  const std::size_t handed = handed_over_.size();
  handed_over_.clear();
  if (running.size() < handed) {
    // Those not taken back run unwatched: ended here, so that none runs twice at once.
    for (const LeftoverTask& task : killLeftoverTasks(config_.work_dir, keep)) {
      log->warn("killed process {} (process group {}) of task directory {}: not taken back",
                task.pid, task.pgid, task.directory);
    }
  }
  if (handed > 0) {
    log->info("{} of {} task(s) handed over by the previous program taken back", running.size(),
              handed);
  }
  return running;
}

void Agent::recordSession(const std::vector<HandedOverTask>& tasks) {
  AgentSession session;
  session.app_id = config_.app_id;
  session.executor_id = config_.executor_id;
  session.driver_url = config_.driver_url;
  session.pid = static_cast<std::uint64_t>(::getpid());
  session.written_unix_ms =
      static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                     std::chrono::system_clock::now().time_since_epoch())
                                     .count());
  session.agent_version = DOCKHAND_VERSION;
  session.tasks = tasks;
  if (auto written = writeSession(sessionPath(config_.work_dir), session); !written) {
    logger("agent")->error("{}: a restart of this agent will register anew instead of resuming",
                           written.error().message);
  }
}

void Agent::reload() {
  auto log = logger("agent");
  // The service manager hears of a reload only once it was told the agent is ready.
  const bool ready = backend_.state() == Backend::State::kRunning;
  if (ready) notifySystemd("RELOADING=1\nSTATUS=reloading the configuration");
  const auto done = [ready] {
    if (ready) notifySystemd("READY=1\nSTATUS=registered with the driver");
  };
  if (!reread_) {
    log->warn("reload: this agent was not started from configuration sources it can read again");
    done();
    return;
  }
  Result<AgentConfig> read = reread_();
  if (!read) {
    log->error("reload: {}; nothing changed", read.error().message);
    done();
    return;
  }
  AgentConfig& wanted = *read;
  if (wanted.cores <= 0) wanted.cores = config_.cores;  // resolved from the host, as at start
  const ReloadPlan plan = planReload(configToJson(config_), configToJson(wanted));
  for (const ConfigChange& change : plan.live) {
    if (change.path == "/log_level") {
      if (!log_control_.setLevel(wanted.log_level)) continue;  // checked by the reader already
      config_.log_level = wanted.log_level;
    } else if (change.path == "/keep_task_dirs") {
      executor_.keepTaskDirs(static_cast<std::size_t>(wanted.keep_task_dirs));
      config_.keep_task_dirs = wanted.keep_task_dirs;
    }
    log->info("reload: {} changed from {} to {}", change.path, change.from.dump(),
              change.to.dump());
  }
  for (const ConfigChange& change : plan.at_restart) {
    log->warn(
        "reload: {} cannot change while the agent runs; kept as it was (a restart in place "
        "applies it)",
        change.path);
  }
  if (plan.live.empty() && plan.at_restart.empty()) {
    log->info("reload: the configuration is unchanged");
  }
  done();
}

}  // namespace dockhand::agent
