// AgentRuntime: the plugins the agent runs with, and the executor built on them.
//
// Plugin directories are searched in order: the config's plugin_dirs, the build or install
// tree next to the program (<bin>/../lib/dockhand/plugins), then the installed default
// (/usr/lib/dockhand/plugins). A required plugin that fails stops the agent before it
// connects; an optional one is logged and left out.
#pragma once

#include <filesystem>
#include <memory>
#include <vector>

#include "app/agent_config.h"
#include "executor/plugin_executor.h"
#include "plugins/plugin_host.h"

namespace dockhand::agent {

// A required plugin could not be loaded or created; what() is the one line to show.
using PluginLoadFailure = PluginLoadError;

class AgentRuntime {
 public:
  // Throws PluginLoadFailure.
  AgentRuntime(const AgentConfig& config, EventSink& events,
               PluginExecutor::StatusHandler on_status);

  Executor& executor() { return *executor_; }

 private:
  PluginHost host_;
  std::unique_ptr<PluginExecutor> executor_;
};

// The directories searched for plugins, in order (see above).
std::vector<std::filesystem::path> pluginSearchPath(const AgentConfig& config);

}  // namespace dockhand::agent
