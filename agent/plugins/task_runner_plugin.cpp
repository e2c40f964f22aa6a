#include "plugins/task_runner_plugin.h"

namespace dockhand::agent {

TaskRunnerPlugin::TaskRunnerPlugin(std::shared_ptr<PluginInstance> instance)
    : instance_(std::move(instance)), table_(instance_->descriptor().task_runner) {
  if (!instance_->library().implements(DH_KIND_TASK_RUNNER) || table_ == nullptr) {
    throw PluginLoadError(instance_->library().label() + ": not a task runner");
  }
}

PluginResult TaskRunnerPlugin::launch(const std::string& task_json) {
  dh_status status = table_->launch(instance_->handle(), task_json.c_str());
  return instance_->result(status);
}

PluginResult TaskRunnerPlugin::tryLaunch(const std::string& task_json) {
  dh_status status = table_->try_launch(instance_->handle(), task_json.c_str());
  if (status == DH_UNSUPPORTED) return PluginResult{status, {}, {}};  // not now: no error
  return instance_->result(status);
}

PluginResult TaskRunnerPlugin::kill(std::uint64_t task_id, bool interrupt,
                                    const std::string& reason) {
  dh_status status = table_->kill(instance_->handle(), task_id, interrupt ? 1 : 0, reason.c_str());
  return instance_->result(status);
}

PluginResult TaskRunnerPlugin::threadDump(std::uint64_t task_id) {
  if (table_->thread_dump == nullptr) {
    return PluginResult{DH_UNSUPPORTED, {}, name() + " does not support thread dumps"};
  }
  const char* out = nullptr;
  dh_status status = table_->thread_dump(instance_->handle(), task_id, &out);
  return instance_->result(status, out);
}

PluginResult TaskRunnerPlugin::taskStats(std::uint64_t task_id) {
  if (table_->task_stats == nullptr) {
    return PluginResult{DH_UNSUPPORTED, {}, name() + " does not report task stats"};
  }
  const char* out = nullptr;
  dh_status status = table_->task_stats(instance_->handle(), task_id, &out);
  return instance_->result(status, out);
}

PluginResult TaskRunnerPlugin::detach(std::uint64_t task_id) {
  if (!canHandOver()) {
    return PluginResult{DH_UNSUPPORTED, {}, name() + " cannot hand tasks over to a new program"};
  }
  const char* out = nullptr;
  dh_status status = table_->detach(instance_->handle(), task_id, &out);
  return instance_->result(status, out);
}

PluginResult TaskRunnerPlugin::adopt(std::uint64_t task_id, const std::string& handle_json) {
  if (!canHandOver()) {
    return PluginResult{DH_UNSUPPORTED, {}, name() + " cannot take tasks back"};
  }
  dh_status status = table_->adopt(instance_->handle(), task_id, handle_json.c_str());
  return instance_->result(status);
}

}  // namespace dockhand::agent
