#include "plugins/task_runner_plugin.h"

namespace dockhand::agent {

TaskRunnerPlugin::TaskRunnerPlugin(std::shared_ptr<PluginInstance> instance)
    : instance_(std::move(instance)), table_(instance_->descriptor().task_runner) {
  if (!instance_->library().implements(DH_KIND_TASK_RUNNER) || table_ == nullptr) {
    throw PluginLoadError(instance_->library().label() + ": not a task runner");
  }
}

PluginResult TaskRunnerPlugin::launch(const std::string& task_json) {
  return instance_->result(table_->launch(instance_->handle(), task_json.c_str()));
}

PluginResult TaskRunnerPlugin::kill(std::uint64_t task_id, bool interrupt,
                                    const std::string& reason) {
  return instance_->result(
      table_->kill(instance_->handle(), task_id, interrupt ? 1 : 0, reason.c_str()));
}

PluginResult TaskRunnerPlugin::threadDump(std::uint64_t task_id) {
  if (table_->thread_dump == nullptr) {
    return PluginResult{DH_UNSUPPORTED, {}, name() + " does not support thread dumps"};
  }
  const char* out = nullptr;
  dh_status status = table_->thread_dump(instance_->handle(), task_id, &out);
  return instance_->result(status, out);
}

}  // namespace dockhand::agent
