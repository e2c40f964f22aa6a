// The plugins an agent's config asks for, and loading them.
//
// Plugins come from two places, in this order: the config's `plugins` list, then the drop-in
// manifests in `plugin_manifest_dir` (/etc/dockhand/plugins.d by default), one plugin entry
// per *.json file ({"name" | "path", "required", "config"}), in file-name order. A package
// that ships a plugin drops its manifest there instead of editing agent.json.
//
// loadPlugins() loads each one (PluginHost: search path, ABI, file permissions), checks its
// config against its schema and creates one instance. A required plugin that fails stops the
// load with PluginLoadError; an optional one is recorded with its error and left out.
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "app/agent_config.h"
#include "dockhand/base/result.h"
#include "plugins/plugin_host.h"

namespace dockhand::agent {

struct PluginSpec {
  std::string target;  // a plugin name (searched in the plugin directories) or a path
  bool required = true;
  nlohmann::json config = nlohmann::json::object();
  std::string origin;  // where it was asked for: "config /plugins/0" or a manifest's path
  // Named in decommission.migration: the agent's block-migration instance of that plugin, with
  // the config migrationPluginConfig() composes (separate from a `plugins` entry's instance).
  bool migration = false;
};

// The *.json files of a manifest directory, in name order (none when it does not exist).
std::vector<std::filesystem::path> manifestFiles(const std::filesystem::path& dir);
// Reads one manifest. Throws ConfigError "FILE: /path: what".
PluginSpec readManifest(const std::filesystem::path& file);
// The config's plugins, then the manifests'. Throws ConfigError for a bad manifest.
std::vector<PluginSpec> pluginSpecs(const AgentConfig& config);

// One plugin as loaded (or not).
struct LoadedPlugin {
  PluginSpec spec;
  std::filesystem::path path;                    // the file, once located
  std::shared_ptr<const PluginLibrary> library;  // null when loading failed
  std::shared_ptr<PluginInstance> instance;      // null when not created
  std::string error;                             // why it failed; empty when it is loaded
  bool ok() const { return error.empty(); }
};

// Loads one spec (and, with `create`, creates its instance); never throws: a failure is the
// result's error, in the words the agent logs, and nothing is logged.
LoadedPlugin loadPlugin(PluginHost& host, const PluginSpec& spec, bool create = true,
                        const PluginCallbacks& callbacks = {});
// What the agent says of a plugin that failed to load: "<error> (required, from <origin>)",
// or "(optional: left out, from <origin>)".
std::string loadFailure(const LoadedPlugin& plugin);

// Loads every spec in order; with `create`, also creates its instance, whose host callbacks
// forward to `callbacks` (a runner's task_status: the executor's runnerReports()). Throws
// PluginLoadError (the first required plugin that failed, with its origin); optional failures
// are logged as warnings and returned with their error.
std::vector<LoadedPlugin> loadPlugins(PluginHost& host, const std::vector<PluginSpec>& specs,
                                      bool create = true, const PluginCallbacks& callbacks = {});

// Every plugin an agent with `config` loads, in its order, each created (with `create`) with
// the config the agent gives it: `specs` (pluginSpecs(config)), then one instance per
// decommission.migration entry, required, as the agent makes it when it decommissions (origin
// "config /decommission/migration/N"). Never throws and logs nothing: a failure is that
// plugin's error (`dockhand plugins list` and `check` report them all).
std::vector<LoadedPlugin> loadEveryPlugin(PluginHost& host, const AgentConfig& config,
                                          const std::vector<PluginSpec>& specs, bool create,
                                          const PluginCallbacks& callbacks = {});

// The `script` plugin as the discovery chain's last step, for a resource profile that names a
// discovery script (docs/resources.md): its spec when the config allows profile scripts
// (allow_profile_discovery_scripts) and no discovery plugin named `script` is among `loaded`;
// nullopt otherwise. Optional: an agent whose script plugin is missing still starts, and a
// profile's script then finds no plugin to run it.
std::optional<PluginSpec> scriptStepSpec(const AgentConfig& config,
                                         const std::vector<LoadedPlugin>& loaded);
// Whether `plugin` was loaded from scriptStepSpec().
bool isScriptStep(const LoadedPlugin& plugin);

// The config a block-migration plugin named in decommission.migration is created with, as
// docs/plugins.md (section 8) gives it: each agent setting its `schema` declares
// (decommission.max_concurrent, bandwidth_bytes_per_s, max_failures_per_block, the agent's
// tls, fallback_dir as "dir"), under the `plugins` entry of the same name's config, under the
// entry's own config. An error names the setting when the schema requires one that is neither
// set nor given (the rule: decommission/migration_config.h). Checking the result against the
// schema is PluginInstance::create's.
Result<nlohmann::json> migrationPluginConfig(const AgentConfig& config, const MigrationEntry& entry,
                                             const nlohmann::json& schema);

// The directories searched for plugins, in order: the config's plugin_dirs, the build or
// install tree next to the program (<bin>/../lib/dockhand/plugins), then the installed default.
std::vector<std::filesystem::path> pluginSearchPath(const AgentConfig& config);

// The plugin_trust policy of `config`, as a PluginHost takes it (allow_insecure_plugins lifts
// the owner-and-mode check of its catalogs and keys too); refusals counted into `metrics` (the
// agent's registry; null: not counted).
PluginTrust pluginTrust(const AgentConfig& config,
                        std::shared_ptr<metrics::Registry> metrics = nullptr);
// The bounds of every plugin call (plugin_call_timeout_ms, plugin_call_warn_ms); the calls
// counted into `metrics` (null: each instance's own registry, which nothing exposes).
PluginCallSettings pluginCallSettings(const AgentConfig& config,
                                      std::shared_ptr<metrics::Registry> metrics = nullptr);

// "task_runner,resource_discovery" for a descriptor's kinds.
std::vector<std::string> kindNames(std::uint32_t kinds);
// A report of what was loaded from where, for `dockhand plugins list --json`, the agent's
// status output and the log. A plugin that failed has "status": "failed" and its "error"; its
// "name" is what was asked for (a name or a path) when the library did not load.
nlohmann::json pluginReport(const std::vector<LoadedPlugin>& plugins);
// The first plugin of `plugins` that is required and did not load, by the name pluginReport
// gives it; nothing when every required one loaded (the agent is not ready otherwise).
std::optional<std::string> requiredPluginNotLoaded(const std::vector<LoadedPlugin>& plugins);

}  // namespace dockhand::agent
