// TaskRunnerPlugin: a task-runner plugin instance as a C++ object.
//
// Every method calls the plugin's hook and, on failure, reads last_error() on the same
// thread. Call them on the instance's call thread only: the executor submits each one through
// instance().calls() (plugins/plugin_calls.h). Status reports arrive on the plugin's own
// threads through the TaskStatusCallback given at creation.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "plugins/plugin_instance.h"

namespace dockhand::agent {

class TaskRunnerPlugin {
 public:
  // Throws PluginLoadError when the instance's plugin is not a task runner.
  explicit TaskRunnerPlugin(std::shared_ptr<PluginInstance> instance);

  const std::string& name() const { return instance_->name(); }
  PluginInstance& instance() const { return *instance_; }

  PluginResult launch(const std::string& task_json);
  // try_launch (ABI 1.5, plugin.h): starts the task only when that needs no waiting;
  // DH_UNSUPPORTED when not now (then launch() it on the call thread). Call it through
  // PluginCalls::callHere, only when canTryLaunch().
  PluginResult tryLaunch(const std::string& task_json);
  bool canTryLaunch() const { return table_->try_launch != nullptr; }
  PluginResult kill(std::uint64_t task_id, bool interrupt, const std::string& reason);
  // DH_UNSUPPORTED when the plugin has no thread_dump hook.
  PluginResult threadDump(std::uint64_t task_id);
  // DH_UNSUPPORTED when the plugin has no task_stats hook (e.g. one built against ABI 1.0).
  PluginResult taskStats(std::uint64_t task_id);

  // detach/adopt (ABI 1.6, plugin.h): a task handed over to the agent's next program and
  // taken back there. Both DH_UNSUPPORTED when the plugin has not both hooks.
  bool canHandOver() const { return table_->detach != nullptr && table_->adopt != nullptr; }
  PluginResult detach(std::uint64_t task_id);
  PluginResult adopt(std::uint64_t task_id, const std::string& handle_json);

  // DH_RUNNER_MAKES_WORK_DIR (ABI 1.4): the runner creates a task's directory when it needs
  // one. The table is a copy, zero beyond the plugin's struct_size: an older plugin says no.
  bool makesWorkDir() const { return (table_->flags & DH_RUNNER_MAKES_WORK_DIR) != 0; }
  // DH_RUNNER_NO_TASK_ENV: the runner does not read task_json's "env"; it is left out.
  bool readsTaskEnv() const { return (table_->flags & DH_RUNNER_NO_TASK_ENV) == 0; }

 private:
  std::shared_ptr<PluginInstance> instance_;
  const dh_task_runner_vtable* table_;
};

}  // namespace dockhand::agent
