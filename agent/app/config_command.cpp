#include "app/config_command.h"

#include <algorithm>
#include <iostream>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include "app/agent_config.h"
#include "app/plugin_loader.h"
#include "core/exit_codes.h"

extern char** environ;

namespace dockhand::agent {

namespace {

using nlohmann::json;

constexpr const char* kConfigUsage =
    "usage: dockhand config validate [FILE]... [--no-env] [--no-plugins]\n"
    "       dockhand config show [--config FILE]... [--json] [--no-env] [--OPTION VALUE]...\n"
    "FILE defaults to " DOCKHAND_DEFAULT_CONFIG " (with its fragments in agent.d/).\n";

std::vector<std::string> environmentEntries(bool use) {
  std::vector<std::string> out;
  if (!use) return out;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) out.emplace_back(*e);
  return out;
}

int usageError(std::ostream& err, const std::string& what) {
  err << "dockhand config: " << what << "\n" << kConfigUsage;
  return toInt(ExitCode::kUsage);
}

// The leaves of `value` by JSON pointer, in document order (objects by key).
void flatten(const json& value, const std::string& path,
             std::vector<std::pair<std::string, const json*>>& out) {
  if (value.is_object() && !value.empty()) {
    for (const auto& item : value.items()) flatten(item.value(), path + "/" + item.key(), out);
  } else if (value.is_array() && !value.empty()) {
    for (std::size_t i = 0; i < value.size(); ++i) {
      flatten(value[i], path + "/" + std::to_string(i), out);
    }
  } else {
    out.emplace_back(path, &value);
  }
}

std::string originOf(const ConfigOrigins& origins, std::string path) {
  while (!path.empty()) {
    if (auto it = origins.find(path); it != origins.end()) return it->second;
    path.resize(path.rfind('/'));
  }
  return "default";
}

// The problems of the plugins' configs, each plugin (decommission.migration's included) loaded
// as the agent loads it but not created: its config against its schema, in the words the agent
// stops with; a required plugin that cannot be loaded is one too.
std::vector<std::string> pluginProblems(const AgentConfig& config) {
  std::vector<std::string> problems;
  std::vector<PluginSpec> specs;
  try {
    specs = pluginSpecs(config);
  } catch (const ConfigError& e) {
    problems.emplace_back(e.what());
  }
  PluginHost host(pluginSearchPath(config), config.allow_insecure_plugins,
                  pluginCallSettings(config), pluginTrust(config));
  for (const LoadedPlugin& plugin : loadEveryPlugin(host, config, specs, /*create=*/false)) {
    if (!plugin.ok()) {
      if (plugin.spec.required) problems.push_back(loadFailure(plugin));
      continue;
    }
    if (auto checked = PluginInstance::checkConfig(*plugin.library, plugin.spec.config); !checked) {
      problems.push_back(fmt::format("{} (from {})", checked.error().message, plugin.spec.origin));
    }
  }
  return problems;
}

int validate(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  ConfigSources sources;
  bool use_env = true;
  bool check_plugins = true;
  for (const std::string& arg : args) {
    if (arg == "--no-plugins") {
      check_plugins = false;
    } else if (arg == "--no-env") {
      use_env = false;
    } else if (arg.rfind('-', 0) == 0) {
      return usageError(err, "unknown option '" + arg + "'");
    } else {
      sources.files.push_back(arg);
    }
  }
  if (sources.files.empty()) sources.files.emplace_back(DOCKHAND_DEFAULT_CONFIG);
  sources.environment = environmentEntries(use_env);
  std::vector<std::string> read;
  for (const auto& file : sources.files) {
    for (auto& path : configFilesFor(file)) read.push_back(std::move(path));
  }
  AgentConfig config;
  try {
    loadConfig(sources, config);
  } catch (const ConfigError& e) {
    for (const auto& problem : e.problems()) err << problem.text() << "\n";
    err << fmt::format("{} problem{} found in {}\n", e.problems().size(),
                       e.problems().size() == 1 ? "" : "s", fmt::join(read, ", "));
    return toInt(ExitCode::kConfigError);
  }
  if (check_plugins) {
    spdlog::set_level(spdlog::level::warn);  // not a line per plugin loaded
    const auto problems = pluginProblems(config);
    for (const auto& problem : problems) err << problem << "\n";
    if (!problems.empty()) {
      err << fmt::format("{} plugin problem{} found with {}\n", problems.size(),
                         problems.size() == 1 ? "" : "s", fmt::join(read, ", "));
      return toInt(ExitCode::kPluginError);
    }
  }
  out << fmt::format("valid: {}{}\n", fmt::join(read, ", "),
                     check_plugins ? " (and the plugins' configs)" : "");
  return toInt(ExitCode::kSuccess);
}

int show(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  ConfigSources sources;
  bool use_env = true;
  bool as_json = false;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--json") {
      as_json = true;
      continue;
    }
    if (arg == "--no-env") {
      use_env = false;
      continue;
    }
    if (arg.rfind("--", 0) != 0 || arg.size() < 3) {
      return usageError(err, "unexpected argument '" + arg + "'");
    }
    std::string name = arg.substr(2);
    std::string value;
    if (auto eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name.resize(eq);
    } else if (i + 1 < args.size()) {
      value = args[++i];
    } else {
      return usageError(err, "option '" + arg + "' needs a value");
    }
    if (name == "config") {
      sources.files.push_back(value);
    } else {
      sources.options.emplace_back(name, value);
    }
  }
  if (sources.files.empty()) sources.files.emplace_back(DOCKHAND_DEFAULT_CONFIG);
  sources.environment = environmentEntries(use_env);

  AgentConfig config;
  ConfigOrigins origins;
  int code = toInt(ExitCode::kSuccess);
  try {
    loadConfig(sources, config, &origins);
  } catch (const ConfigError& e) {
    // Still show what could be read: an operator debugging a config wants both.
    for (const auto& problem : e.problems()) err << "config error: " << problem.text() << "\n";
    code = toInt(ExitCode::kConfigError);
  }
  applyDefaults(config);
  json effective = redactSecrets(configToJson(config));
  std::vector<std::pair<std::string, const json*>> leaves;
  flatten(effective, "", leaves);
  if (as_json) {
    json origin_map = json::object();
    for (const auto& [path, value] : leaves) origin_map[path] = originOf(origins, path);
    out << json{{"config", effective}, {"origins", origin_map}}.dump(2) << "\n";
    return code;
  }
  std::size_t key_width = 0;
  std::size_t value_width = 0;
  std::vector<std::string> texts;
  for (const auto& [path, value] : leaves) {
    texts.push_back(value->dump());
    key_width = std::max(key_width, path.size());
    value_width = std::max(value_width, std::min<std::size_t>(texts.back().size(), 40));
  }
  for (std::size_t i = 0; i < leaves.size(); ++i) {
    out << fmt::format("{:<{}}  {:<{}}  {}\n", leaves[i].first, key_width, texts[i], value_width,
                       originOf(origins, leaves[i].first));
  }
  return code;
}

}  // namespace

int runConfigCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  if (args.empty() || args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
    (args.empty() ? err : out) << kConfigUsage;
    return toInt(args.empty() ? ExitCode::kUsage : ExitCode::kSuccess);
  }
  std::vector<std::string> rest(args.begin() + 1, args.end());
  if (args[0] == "validate") return validate(rest, out, err);
  if (args[0] == "show") return show(rest, out, err);
  return usageError(err, "unknown command '" + args[0] + "'");
}

}  // namespace dockhand::agent
