#include "app/plugins_command.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/sinks/null_sink.h>
#include <spdlog/spdlog.h>

#include "app/agent_config.h"
#include "app/plugin_loader.h"
#include "app/plugins_check.h"
#include "app/plugins_new.h"
#include "core/exit_codes.h"
#include "dockhand/tls/tls.h"
#include "plugins/plugin_trust.h"

namespace dockhand::agent {
namespace {

using nlohmann::json;

constexpr const char* kPluginsUsage =
    "usage: dockhand plugins list [--config FILE]... [--json]\n"
    "       dockhand plugins check [--config FILE]... [--json] [--resource NAME]...\n"
    "                              [--payload [RUNNER=]JSON]...\n"
    "       dockhand plugins inspect FILE [--json] [--allow-insecure]\n"
    "       dockhand plugins sign --key PRIVATE_KEY FILE\n"
    "       dockhand plugins trust FILE [--catalog CATALOG]\n"
    "       dockhand plugins new --kind discovery|runner|migration|job NAME [--dir DIR]\n";

int usage(std::ostream& err, const std::string& problem) {
  err << "dockhand plugins: " << problem << "\n" << kPluginsUsage;
  return toInt(ExitCode::kUsage);
}

// The config files to read: those given, or the installed agent.json when it exists.
std::vector<std::string> configFiles(const std::vector<std::string>& given) {
  std::vector<std::string> files;
  std::vector<std::string> roots = given;
  std::error_code ec;
  if (roots.empty() && std::filesystem::exists(DOCKHAND_DEFAULT_CONFIG, ec)) {
    roots.emplace_back(DOCKHAND_DEFAULT_CONFIG);
  }
  for (const auto& root : roots) {
    for (auto& file : configFilesFor(root)) files.push_back(std::move(file));
  }
  return files;
}

// The agent's config as it would read it from `given` (see configFiles), with its defaults
// (the scratch peer of `check` serves TLS at the agent's hostname), and the plugins it asks for.
struct ReadConfig {
  AgentConfig config;
  std::vector<PluginSpec> specs;
};
// A config error is said on `err`, and nullopt returned.
std::optional<ReadConfig> readConfig(const std::vector<std::string>& given, std::ostream& err) {
  ReadConfig read;
  try {
    for (const auto& file : configFiles(given)) loadConfigFile(file, read.config);
    applyDefaults(read.config);
    read.specs = pluginSpecs(read.config);
  } catch (const ConfigError& e) {
    err << "dockhand: config error: " << e.what() << "\n";
    return std::nullopt;
  }
  return read;
}

// Plugin log lines would interleave with the listing; keep only warnings and worse on stderr.
void quietLogging() { spdlog::set_level(spdlog::level::warn); }

json hooksOf(const dh_plugin_descriptor& d) {
  json hooks = json::object();
  if (const auto* t = d.resource_discovery) {
    std::vector<std::string> names = {"discover"};
    if (t->allocate) names.emplace_back("allocate");
    if (t->release) names.emplace_back("release");
    if (t->describe) names.emplace_back("describe");
    hooks["resource_discovery"] = names;
  }
  if (const auto* t = d.task_runner) {
    std::vector<std::string> names = {"launch", "kill"};
    if (t->thread_dump) names.emplace_back("thread_dump");
    if (t->task_stats) names.emplace_back("task_stats");
    if (t->try_launch) names.emplace_back("try_launch");
    if (t->detach) names.emplace_back("detach");
    if (t->adopt) names.emplace_back("adopt");
    hooks["task_runner"] = names;
  }
  if (const auto* t = d.block_migration) {
    std::vector<std::string> names = {"migrate"};
    if (t->cancel) names.emplace_back("cancel");
    hooks["block_migration"] = names;
  }
  return hooks;
}

int list(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  std::vector<std::string> given;
  bool as_json = false;
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--json") {
      as_json = true;
    } else if (args[i] == "--config" && i + 1 < args.size()) {
      given.push_back(args[++i]);
    } else {
      return usage(err, "unexpected argument '" + args[i] + "'");
    }
  }
  auto read = readConfig(given, err);
  if (!read) return toInt(ExitCode::kConfigError);
  const auto& [config, specs] = *read;
  quietLogging();
  PluginHost host(pluginSearchPath(config), config.allow_insecure_plugins,
                  pluginCallSettings(config), pluginTrust(config));
  // Every plugin, required or not, to report on all of them.
  const std::vector<LoadedPlugin> loaded = loadEveryPlugin(host, config, specs, /*create=*/true);
  std::string required_failure;
  for (const auto& plugin : loaded) {
    if (!plugin.ok() && plugin.spec.required && required_failure.empty()) {
      required_failure = loadFailure(plugin);
    }
  }
  json report = pluginReport(loaded);
  if (as_json) {
    json dirs = json::array();
    for (const auto& d : host.pluginDirs()) dirs.push_back(d.string());
    out << json{{"plugin_dirs", dirs},
                {"manifest_dir", config.plugin_manifest_dir},
                {"plugins", report}}
               .dump(2)
        << "\n";
  } else {
    out << "plugin directories:";
    for (const auto& d : host.pluginDirs()) out << " " << d.string();
    out << "\nmanifests: " << config.plugin_manifest_dir << "\n";
    if (report.empty()) out << "no plugins configured\n";
    for (const auto& p : report) {
      if (p["status"] == "loaded") {
        out << fmt::format("{:<16} {:<8} ABI {}  {}\n", p["name"].get<std::string>(),
                           p["version"].get<std::string>(), p["abi"].get<std::string>(),
                           fmt::join(p["kinds"].get<std::vector<std::string>>(), ","));
        out << fmt::format("    file {}\n", p["path"].get<std::string>());
        if (p.value("trusted_by", std::string("any")) != "any") {
          out << fmt::format("    trusted by {}\n", p["trusted_by"].get<std::string>());
        }
      } else {
        out << fmt::format("{:<16} FAILED ({})\n", p["target"].get<std::string>(),
                           p["required"].get<bool>() ? "required" : "optional");
        out << fmt::format("    error: {}\n", p["error"].get<std::string>());
      }
      out << fmt::format("    from {}{}\n", p["origin"].get<std::string>(),
                         p.contains("role") ? " (its block-migration instance)" : "");
    }
  }
  if (!required_failure.empty()) {
    err << "dockhand: a required plugin failed: " << required_failure << "\n";
    return toInt(ExitCode::kPluginError);
  }
  return toInt(ExitCode::kSuccess);
}

int check(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  std::vector<std::string> given;
  PluginCheckOptions options;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const bool has_value = i + 1 < args.size();
    if (args[i] == "--json") {
      options.as_json = true;
    } else if (args[i] == "--config" && has_value) {
      given.push_back(args[++i]);
    } else if (args[i] == "--resource" && has_value) {
      options.resources.push_back(args[++i]);
    } else if (args[i] == "--payload" && has_value) {
      // [RUNNER=]JSON: a JSON object starts with '{', a runner's name never does.
      const std::string& value = args[++i];
      const std::size_t eq = value.find('=');
      const bool named = !value.empty() && value.front() != '{' && eq != std::string::npos;
      json payload = json::parse(named ? value.substr(eq + 1) : value, nullptr, false);
      if (!payload.is_object()) return usage(err, "--payload takes [RUNNER=]JSON-OBJECT");
      options.payloads[named ? value.substr(0, eq) : std::string()] = std::move(payload);
    } else {
      return usage(err, "unexpected argument '" + args[i] + "'");
    }
  }
  auto read = readConfig(given, err);
  if (!read) return toInt(ExitCode::kConfigError);
  quietLogging();
  try {
    return checkPlugins(read->config, read->specs, options, out);
  } catch (const std::exception& e) {
    err << "dockhand: plugins check: " << e.what() << "\n";
    return toInt(ExitCode::kPluginError);
  }
}

// The whole of a file, or why not.
Result<std::string> readWhole(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Error(path + ": cannot be read: " + std::strerror(errno));
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// `plugins sign --key KEY FILE`: FILE.sig, the base64 Ed25519 signature of FILE's bytes.
int sign(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  std::string key_file;
  std::string file;
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--key" && i + 1 < args.size()) {
      key_file = args[++i];
    } else if (file.empty() && args[i].rfind("--", 0) != 0) {
      file = args[i];
    } else {
      return usage(err, "unexpected argument '" + args[i] + "'");
    }
  }
  if (key_file.empty() || file.empty()) return usage(err, "sign needs --key PRIVATE_KEY and FILE");
  auto key = readWhole(key_file);
  auto bytes = readWhole(file);
  for (const auto* read : {&key, &bytes}) {
    if (!*read) {
      err << "dockhand: plugins sign: " << read->error().message << "\n";
      return toInt(ExitCode::kPluginError);
    }
  }
  std::string signature;
  try {
    signature = tls::signEd25519(*key, *bytes);
  } catch (const tls::TlsError& e) {
    err << "dockhand: plugins sign: " << key_file << ": " << e.what() << "\n";
    return toInt(ExitCode::kPluginError);
  }
  const auto sig_file = signatureFile(file);
  std::ofstream written(sig_file);
  written << signatureFileText(signature);
  if (!written.flush()) {
    err << "dockhand: plugins sign: cannot write " << sig_file.string() << "\n";
    return toInt(ExitCode::kPluginError);
  }
  out << "signed " << file << " (SHA-256 " << sha256Hex(*bytes) << "): " << sig_file.string()
      << "\n";
  return toInt(ExitCode::kSuccess);
}

// `plugins trust FILE [--catalog CATALOG]`: pins FILE's SHA-256 in the operator's catalog.
int trust(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  // The operator's catalog: the last of the default catalogs (the package's comes first).
  std::string catalog = defaultPluginTrust().catalogs.back().string();
  std::string file;
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--catalog" && i + 1 < args.size()) {
      catalog = args[++i];
    } else if (file.empty() && args[i].rfind("--", 0) != 0) {
      file = args[i];
    } else {
      return usage(err, "unexpected argument '" + args[i] + "'");
    }
  }
  if (file.empty()) return usage(err, "trust needs a plugin FILE");
  auto bytes = readWhole(file);
  if (!bytes) {
    err << "dockhand: plugins trust: " << bytes.error().message << "\n";
    return toInt(ExitCode::kPluginError);
  }
  const std::string hash = sha256Hex(*bytes);
  const std::string absolute = std::filesystem::absolute(file).lexically_normal().string();
  if (auto existing = readWhole(catalog); existing && existing->find(hash) != std::string::npos) {
    out << "already pinned in " << catalog << ": " << hash << "  " << absolute << "\n";
    return toInt(ExitCode::kSuccess);
  }
  std::ofstream append(catalog, std::ios::app);
  append << hash << "  " << absolute << "\n";
  if (!append.flush()) {
    err << "dockhand: plugins trust: cannot write " << catalog << ": " << std::strerror(errno)
        << "\n";
    return toInt(ExitCode::kPluginError);
  }
  out << "pinned in " << catalog << ": " << hash << "  " << absolute << "\n";
  return toInt(ExitCode::kSuccess);
}

int inspect(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  std::string file;
  bool as_json = false;
  bool allow_insecure = false;
  for (const auto& arg : args) {
    if (arg == "--json") {
      as_json = true;
    } else if (arg == "--allow-insecure") {
      allow_insecure = true;
    } else if (file.empty() && arg.rfind("--", 0) != 0) {
      file = arg;
    } else {
      return usage(err, "unexpected argument '" + arg + "'");
    }
  }
  if (file.empty()) return usage(err, "inspect needs a plugin FILE");
  quietLogging();
  std::shared_ptr<const PluginLibrary> library;
  try {
    library = PluginLibrary::open(file, allow_insecure);
  } catch (const PluginLoadError& e) {
    err << "dockhand: " << e.what() << "\n";
    return toInt(ExitCode::kPluginError);
  }
  const dh_plugin_descriptor& d = library->descriptor();
  json info = {{"file", std::filesystem::absolute(file).string()},
               {"name", library->name()},
               {"version", library->version()},
               {"description", d.description ? d.description : ""},
               {"abi", library->abiVersion()},
               {"host_abi", std::to_string(DH_ABI_MAJOR) + "." + std::to_string(DH_ABI_MINOR)},
               {"kinds", kindNames(d.kinds)},
               {"hooks", hooksOf(d)},
               {"config_schema", library->configSchema()}};
  if (as_json) {
    out << info.dump(2) << "\n";
    return toInt(ExitCode::kSuccess);
  }
  out << "name:        " << library->name() << "\n"
      << "version:     " << library->version() << "\n"
      << "description: " << info["description"].get<std::string>() << "\n"
      << "file:        " << info["file"].get<std::string>() << "\n"
      << "ABI:         " << library->abiVersion()
      << " (this agent: " << info["host_abi"].get<std::string>() << ")\n"
      << "kinds:       " << fmt::format("{}", fmt::join(kindNames(d.kinds), ", ")) << "\n";
  for (const auto& [kind, hooks] : info["hooks"].items()) {
    out << "hooks:       " << kind << ": "
        << fmt::format("{}", fmt::join(hooks.get<std::vector<std::string>>(), ", ")) << "\n";
  }
  if (library->configSchema().is_null()) {
    out << "config schema: none (the plugin checks its config itself)\n";
  } else {
    out << "config schema:\n" << library->configSchema().dump(2) << "\n";
  }
  return toInt(ExitCode::kSuccess);
}

}  // namespace

int runPluginsCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  if (args.empty() || args.front() == "--help" || args.front() == "-h") {
    (args.empty() ? err : out) << kPluginsUsage;
    return toInt(args.empty() ? ExitCode::kUsage : ExitCode::kSuccess);
  }
  std::vector<std::string> rest(args.begin() + 1, args.end());
  if (args.front() == "list") return list(rest, out, err);
  if (args.front() == "inspect") return inspect(rest, out, err);
  if (args.front() == "check") return check(rest, out, err);
  if (args.front() == "sign") return sign(rest, out, err);
  if (args.front() == "trust") return trust(rest, out, err);
  if (args.front() == "new") return runPluginsNew(rest, out, err);
  return usage(err, "unknown subcommand '" + args.front() + "'");
}

}  // namespace dockhand::agent
