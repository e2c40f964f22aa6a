// PluginExecutor's side of a restart in place: running tasks handed over to the next program
// of the same process (handOver) and taken back there (adopt), through their runners' detach
// and adopt hooks (plugin.h, ABI 1.6). docs/architecture.md, "Restarts", says why this way.
#include "executor/plugin_executor.h"

#include "dockhand/base/log_format.h"
#include "dockhand/base/logging.h"

namespace dockhand::agent {

std::vector<HandedOverTask> PluginExecutor::handOver() {
  std::vector<HandedOverTask> handed;
  std::vector<std::uint64_t> ids;
  ids.reserve(registry_->tasks.size());
  for (const auto& [task_id, runner] : registry_->tasks) ids.push_back(task_id);
  for (const std::uint64_t task_id : ids) {
    Runner* runner = registry_->tasks.at(task_id);
    const TaskLogScope scope(task_id);
    if (!runner->plugin->canHandOver()) {
      logger("agent")->info("task {}: runner '{}' cannot let it outlive the program; it is stopped",
                            task_id, runner->name);
      continue;
    }
    if (runner->calls->stuck()) continue;
    PluginResult result = runner->calls->call(
        {"detach", task_id}, [runner, task_id] { return runner->plugin->detach(task_id); });
    if (!result.ok()) {
      // DH_NOT_FOUND: it ended just now, and its status is on its way.
      if (result.status != DH_NOT_FOUND) {
        logger("agent")->info("task {}: runner '{}' kept it ({}); it is stopped", task_id,
                              runner->name, result.error);
      }
      continue;
    }
    Json handle = Json::parse(result.json, nullptr, /*allow_exceptions=*/false);
    if (!handle.is_object()) {
      // The runner let go of it already: nothing here can take it back, so it ends as a
      // crashed agent's leftover would (the next program kills it and reports it LOST).
      logger("agent")->error(
          "task {}: runner '{}' handed it over with a handle that is not a JSON object", task_id,
          runner->name);
      handle = Json::object();
    }
    registry_->tasks.erase(task_id);
    registry_->input_metrics.erase(task_id);  // the next program measures from adoption on
    {
      std::lock_guard lock(live_->mutex);
      live_->tasks.erase(task_id);
    }
    handed.push_back(HandedOverTask{task_id, runner->name, std::move(handle), 0, {}});
  }
  live_->ended.notify_all();
  if (!handed.empty()) {
    logger("agent")->info("{} running task(s) handed over to the next program", handed.size());
  }
  return handed;
}

Result<void> PluginExecutor::adopt(const HandedOverTask& task) {
  const TaskLogScope scope(task.task_id);
  auto runner_it = runners_.find(task.runner);
  if (runner_it == runners_.end()) {
    return Error("no task runner named '" + task.runner + "' in this program");
  }
  Runner* runner = runner_it->second.get();
  if (registry_->tasks.count(task.task_id) != 0) {
    return Error("task " + std::to_string(task.task_id) + " is running already");
  }
  const std::string handle = task.handle.dump();
  const std::uint64_t task_id = task.task_id;
  PluginResult result = runner->calls->call({"adopt", task_id}, [runner, task_id, &handle] {
    return runner->plugin->adopt(task_id, handle);
  });
  if (!result.ok()) return Error(runner->name + ": " + result.error);
  registry_->tasks[task_id] = runner;
  {
    std::lock_guard lock(live_->mutex);
    live_->tasks.insert(task_id);
  }
  return {};
}

}  // namespace dockhand::agent
