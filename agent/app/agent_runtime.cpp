#include "app/agent_runtime.h"

#include <unistd.h>

#include "core/logging.h"

namespace dockhand::agent {

std::vector<std::filesystem::path> pluginSearchPath(const AgentConfig& config) {
  std::vector<std::filesystem::path> dirs(config.plugin_dirs.begin(), config.plugin_dirs.end());
  std::error_code ec;
  auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) dirs.push_back(self.parent_path().parent_path() / "lib" / "dockhand" / "plugins");
  dirs.emplace_back(DOCKHAND_DEFAULT_PLUGIN_DIR);
  return dirs;
}

AgentRuntime::AgentRuntime(const AgentConfig& config, EventSink& events,
                           PluginExecutor::StatusHandler on_status)
    : host_(pluginSearchPath(config)) {
  auto log = logger("agent");
  std::map<std::string, TaskRunnerFactory> runners;
  for (const PluginEntry& entry : config.plugins) {
    const std::string& what = entry.path.empty() ? entry.name : entry.path;
    try {
      auto library = host_.load(what);
      if (!library->implements(DH_KIND_TASK_RUNNER)) {
        log->info("{} loaded (no task runner in it)", library->label());
        continue;
      }
      runners.emplace(library->name(), host_.taskRunnerFactory(what, entry.config.dump()));
      log->info("{} {} loaded", library->label(), library->version());
    } catch (const PluginLoadError& e) {
      if (entry.required) throw;
      log->warn("optional plugin left out: {}", e.what());
    }
  }
  executor_ = std::make_unique<PluginExecutor>(events, std::move(on_status), config.work_dir,
                                               config.executor_id, std::move(runners));
}

}  // namespace dockhand::agent
