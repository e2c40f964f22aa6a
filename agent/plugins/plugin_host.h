// PluginHost: finds, loads and instantiates plugins.
//
//   PluginHost host({"/usr/lib/dockhand/plugins"});
//   auto runner = host.createTaskRunner("process", R"({"kill_grace_ms": 2000})", on_status);
//
// A plugin is named either by its name ("process" -> "<dir>/dockhand-process.so", the first
// of the configured directories that has it) or by a path (anything with a '/' or ending in
// ".so", used as given). Each file is loaded once; a second file declaring a name already
// loaded is refused. Every failure throws PluginLoadError with one line naming the file and
// the reason.
//
// Libraries stay loaded while the host or any instance created from them lives (no hot
// unload). Use the host from one thread at a time (start-up and shutdown).
#pragma once

#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "plugins/block_migration_plugin.h"
#include "plugins/plugin_error.h"
#include "plugins/plugin_instance.h"
#include "plugins/plugin_library.h"
#include "plugins/resource_discovery_plugin.h"
#include "plugins/task_runner_plugin.h"

namespace dockhand::agent {

class PluginHost {
 public:
  // `allow_insecure` lets files and directories that group or others may write be loaded
  // (development only; see PluginLibrary::open). Every instance's hook calls are bounded and
  // timed by `limits` (plugin_call_timeout_ms, plugin_call_warn_ms; see plugin_calls.h). A file
  // loads only when `trust` lets it (plugin_trust.h; the default trusts any file).
  explicit PluginHost(std::vector<std::filesystem::path> plugin_dirs, bool allow_insecure = false,
                      PluginCallSettings limits = {}, PluginTrust trust = {});

  // The file for a plugin name or path. Throws PluginLoadError when no directory has it.
  std::filesystem::path locate(const std::string& name_or_path) const;

  // Loads (once) and checks a plugin library.
  std::shared_ptr<const PluginLibrary> load(const std::string& name_or_path);
  // Makes an already loaded library (e.g. PluginLibrary::fromDescriptor) known by its name,
  // as if load() had found it. Throws PluginLoadError for a name already loaded.
  void add(std::shared_ptr<const PluginLibrary> library);

  // Loads the plugin and creates an instance with its config object (JSON text).
  std::shared_ptr<PluginInstance> create(const std::string& name_or_path,
                                         const std::string& config_json,
                                         PluginCallbacks callbacks = {});

  std::unique_ptr<TaskRunnerPlugin> createTaskRunner(const std::string& name_or_path,
                                                     const std::string& config_json,
                                                     TaskStatusCallback on_status);
  std::unique_ptr<ResourceDiscoveryPlugin> createResourceDiscovery(const std::string& name_or_path,
                                                                   const std::string& config_json);
  std::unique_ptr<BlockMigrationPlugin> createBlockMigration(const std::string& name_or_path,
                                                             const std::string& config_json,
                                                             MigrationProgressCallback on_progress,
                                                             RequestSigner sign_request = {});

  const std::vector<std::filesystem::path>& pluginDirs() const { return plugin_dirs_; }
  const PluginCallSettings& callLimits() const { return call_limits_; }

 private:
  std::vector<std::filesystem::path> plugin_dirs_;
  bool allow_insecure_ = false;
  PluginTrust trust_;
  PluginCallSettings call_limits_;
  mutable std::mutex mutex_;
  std::map<std::filesystem::path, std::shared_ptr<const PluginLibrary>> by_path_;
  std::map<std::string, std::shared_ptr<const PluginLibrary>> by_name_;
};

}  // namespace dockhand::agent
