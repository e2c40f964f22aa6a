#include "app/plugin_loader.h"

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "decommission/migration_config.h"
#include "dockhand/base/logging.h"

namespace dockhand::agent {

using nlohmann::json;

namespace {

// The agent settings a block-migration plugin may take (composeMigrationConfig gives it those
// its config schema declares).
std::vector<MigrationSetting> migrationSettings(const AgentConfig& config) {
  const DecommissionConfig& d = config.decommission;
  json tls = nullptr;
  if (config.tls.enabled) {
    // Migration over https:// with the agent's own TLS files (docs/plugins.md).
    tls = {{"ca_file", config.tls.ca_file},
           {"certificate_file", config.tls.certificate_file},
           {"private_key_file", config.tls.private_key_file},
           {"verify_hostname", config.tls.verify_hostname}};
  }
  return {
      {"max_concurrent", "decommission.max_concurrent", d.max_concurrent},
      {"bandwidth_bytes_per_s", "decommission.bandwidth_bytes_per_s", d.bandwidth_bytes_per_s},
      {"max_failures_per_block", "decommission.max_failures_per_block", d.max_failures_per_block},
      {"tls", "tls", std::move(tls)},
      {"dir", "fallback_dir",
       config.fallback_dir.empty() ? json(nullptr) : json(config.fallback_dir)}};
}

}  // namespace

Result<json> migrationPluginConfig(const AgentConfig& config, const MigrationEntry& entry,
                                   const json& schema) {
  // What it declares of the agent's settings, and nothing it does not (the host knows no
  // plugin by name), under what the config gives it.
  json given = json::object();
  for (const PluginEntry& plugin : config.plugins) {
    if (plugin.name == entry.name && plugin.config.is_object()) given.update(plugin.config);
  }
  if (entry.config.is_object()) given.update(entry.config);
  return composeMigrationConfig(entry.name, given, migrationSettings(config), schema);
}

std::vector<std::filesystem::path> manifestFiles(const std::filesystem::path& dir) {
  std::vector<std::filesystem::path> files;
  std::error_code ec;
  if (dir.empty() || !std::filesystem::is_directory(dir, ec)) return files;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const auto& p = entry.path();
    // Editors' and dpkg's leftovers (x.json.dpkg-old, .#x.json) are not manifests.
    if (p.extension() != ".json" || p.filename().string().front() == '.') continue;
    if (!entry.is_regular_file(ec)) continue;
    files.push_back(p);
  }
  std::sort(files.begin(), files.end());
  return files;
}

PluginSpec readManifest(const std::filesystem::path& file) {
  const std::string origin = file.string();
  std::ifstream in(file, std::ios::binary);
  if (!in) throw ConfigError(origin + ": cannot read");
  std::ostringstream text;
  text << in.rdbuf();
  json root = json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded()) throw ConfigError(origin + ": invalid JSON");
  if (!root.is_object()) throw ConfigError(origin + ": /: expected a plugin entry object");
  static const std::set<std::string> kKeys = {"name", "path", "required", "config"};
  PluginSpec spec;
  spec.origin = origin;
  for (const auto& [key, value] : root.items()) {
    if (kKeys.count(key) == 0) {
      throw ConfigError(fmt::format(
          "{}: /{}: unknown key (known keys: config, name, path, required)", origin, key));
    }
  }
  auto string_at = [&](const char* key) -> std::string {
    auto it = root.find(key);
    if (it == root.end()) return {};
    if (!it->is_string()) throw ConfigError(origin + ": /" + key + ": expected a string");
    return it->get<std::string>();
  };
  const std::string name = string_at("name");
  const std::string path = string_at("path");
  if (name.empty() && path.empty()) {
    throw ConfigError(origin + ": /: a plugin entry needs a name or a path");
  }
  spec.target = path.empty() ? name : path;
  if (auto it = root.find("required"); it != root.end()) {
    if (!it->is_boolean()) throw ConfigError(origin + ": /required: expected true or false");
    spec.required = it->get<bool>();
  }
  if (auto it = root.find("config"); it != root.end()) {
    if (!it->is_object()) throw ConfigError(origin + ": /config: expected an object");
    spec.config = *it;
  }
  return spec;
}

std::vector<PluginSpec> pluginSpecs(const AgentConfig& config) {
  std::vector<PluginSpec> specs;
  for (std::size_t i = 0; i < config.plugins.size(); ++i) {
    const PluginEntry& entry = config.plugins[i];
    specs.push_back(PluginSpec{entry.path.empty() ? entry.name : entry.path, entry.required,
                               entry.config, "config /plugins/" + std::to_string(i)});
  }
  for (const auto& file : manifestFiles(config.plugin_manifest_dir)) {
    specs.push_back(readManifest(file));
  }
  return specs;
}

namespace {
constexpr const char* kScriptStepOrigin =
    "built in: the discovery chain's last step for a profile's discovery_script";
}  // namespace

std::optional<PluginSpec> scriptStepSpec(const AgentConfig& config,
                                         const std::vector<LoadedPlugin>& loaded) {
  if (!config.allow_profile_discovery_scripts) return std::nullopt;
  for (const LoadedPlugin& plugin : loaded) {
    if (plugin.ok() && plugin.library->name() == "script" &&
        plugin.library->implements(DH_KIND_RESOURCE_DISCOVERY)) {
      return std::nullopt;  // listed: asked where the config puts it
    }
  }
  return PluginSpec{"script", /*required=*/false, json::object(), kScriptStepOrigin};
}

bool isScriptStep(const LoadedPlugin& plugin) { return plugin.spec.origin == kScriptStepOrigin; }

std::vector<std::string> kindNames(std::uint32_t kinds) {
  std::vector<std::string> names;
  if (kinds & DH_KIND_RESOURCE_DISCOVERY) names.emplace_back("resource_discovery");
  if (kinds & DH_KIND_TASK_RUNNER) names.emplace_back("task_runner");
  if (kinds & DH_KIND_BLOCK_MIGRATION) names.emplace_back("block_migration");
  return names;
}

PluginCallSettings pluginCallSettings(const AgentConfig& config,
                                      std::shared_ptr<metrics::Registry> metrics) {
  return PluginCallSettings{std::chrono::milliseconds(config.plugin_call_timeout_ms),
                            std::chrono::milliseconds(config.plugin_call_warn_ms),
                            std::move(metrics)};
}

PluginTrust pluginTrust(const AgentConfig& config, std::shared_ptr<metrics::Registry> metrics) {
  PluginTrust trust = config.plugin_trust;
  trust.allow_insecure = config.allow_insecure_plugins;
  trust.metrics = std::move(metrics);
  return trust;
}

std::vector<std::filesystem::path> pluginSearchPath(const AgentConfig& config) {
  std::vector<std::filesystem::path> dirs(config.plugin_dirs.begin(), config.plugin_dirs.end());
  std::error_code ec;
  auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) dirs.push_back(self.parent_path().parent_path() / "lib" / "dockhand" / "plugins");
  dirs.emplace_back(DOCKHAND_DEFAULT_PLUGIN_DIR);
  return dirs;
}

LoadedPlugin loadPlugin(PluginHost& host, const PluginSpec& spec, bool create,
                        const PluginCallbacks& callbacks) {
  LoadedPlugin plugin;
  plugin.spec = spec;
  try {
    plugin.path = host.locate(spec.target);
    plugin.library = host.load(spec.target);
    if (create) {
      plugin.instance =
          PluginInstance::create(plugin.library, spec.config.dump(), callbacks, host.callLimits());
    }
  } catch (const PluginLoadError& e) {
    plugin.error = e.what();
    plugin.instance.reset();
  }
  return plugin;
}

std::string loadFailure(const LoadedPlugin& plugin) {
  return fmt::format("{} ({}, from {})", plugin.error,
                     plugin.spec.required ? "required" : "optional: left out", plugin.spec.origin);
}

std::vector<LoadedPlugin> loadPlugins(PluginHost& host, const std::vector<PluginSpec>& specs,
                                      bool create, const PluginCallbacks& callbacks) {
  std::vector<LoadedPlugin> loaded;
  for (const PluginSpec& spec : specs) {
    LoadedPlugin plugin = loadPlugin(host, spec, create, callbacks);
    if (!plugin.ok()) {
      if (spec.required) throw PluginLoadError(loadFailure(plugin));
      logger("agent")->warn("{}", loadFailure(plugin));
    }
    loaded.push_back(std::move(plugin));
  }
  return loaded;
}

std::vector<LoadedPlugin> loadEveryPlugin(PluginHost& host, const AgentConfig& config,
                                          const std::vector<PluginSpec>& specs, bool create,
                                          const PluginCallbacks& callbacks) {
  const auto& entries = config.decommission.migration;
  std::vector<LoadedPlugin> loaded;
  loaded.reserve(specs.size() + entries.size());
  for (const PluginSpec& spec : specs) loaded.push_back(loadPlugin(host, spec, create, callbacks));
  for (std::size_t i = 0; i < entries.size(); ++i) {
    PluginSpec spec;
    spec.target = entries[i].name;
    spec.required = true;
    spec.origin = fmt::format("config /decommission/migration/{}", i);
    spec.migration = true;
    LoadedPlugin plugin;
    try {
      auto composed =
          migrationPluginConfig(config, entries[i], host.load(spec.target)->configSchema());
      if (composed) {
        spec.config = std::move(*composed);
        plugin = loadPlugin(host, spec, create, callbacks);
      } else {
        plugin.spec = spec;
        plugin.error = composed.error().message;
      }
    } catch (const PluginLoadError& e) {
      plugin.spec = spec;
      plugin.error = e.what();
    }
    loaded.push_back(std::move(plugin));
  }
  return loaded;
}

namespace {

// A plugin's name in reports: its library's, or what was asked for (a name or a path).
std::string pluginName(const LoadedPlugin& plugin) {
  return plugin.library ? plugin.library->name() : plugin.spec.target;
}

}  // namespace

std::optional<std::string> requiredPluginNotLoaded(const std::vector<LoadedPlugin>& plugins) {
  for (const LoadedPlugin& p : plugins) {
    if (p.spec.required && !p.ok()) return pluginName(p);
  }
  return std::nullopt;
}

json pluginReport(const std::vector<LoadedPlugin>& plugins) {
  json out = json::array();
  for (const LoadedPlugin& p : plugins) {
    json entry = {{"target", p.spec.target},
                  {"origin", p.spec.origin},
                  {"required", p.spec.required},
                  {"status", p.ok() ? "loaded" : "failed"}};
    if (p.spec.migration) entry["role"] = "decommission.migration";
    if (!p.path.empty()) entry["path"] = p.path.string();
    if (p.library) {
      entry["version"] = p.library->version();
      entry["abi"] = p.library->abiVersion();
      entry["kinds"] = kindNames(p.library->descriptor().kinds);
      entry["trusted_by"] = p.library->trustedBy();
    }
    entry["name"] = pluginName(p);
    if (!p.ok()) entry["error"] = p.error;
    out.push_back(std::move(entry));
  }
  return out;
}

}  // namespace dockhand::agent
