#include "app/discover_command.h"

#include <filesystem>
#include <iostream>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include "app/agent_config.h"
#include "app/plugin_loader.h"
#include "core/exit_codes.h"
#include "resources/resource_discovery.h"
#include "resources/resources_file.h"

namespace dockhand::agent {
namespace {

using nlohmann::json;

constexpr const char* kDiscoverUsage =
    "usage: dockhand discover [--config FILE]... [--resourcesFile FILE] [--json]\n";

}  // namespace

int runDiscoverCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  std::vector<std::string> files;
  std::string resources_file;
  bool as_json = false;
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--json") {
      as_json = true;
    } else if (args[i] == "--config" && i + 1 < args.size()) {
      files.push_back(args[++i]);
    } else if (args[i] == "--resourcesFile" && i + 1 < args.size()) {
      resources_file = args[++i];
    } else if (args[i] == "--help" || args[i] == "-h") {
      out << kDiscoverUsage;
      return toInt(ExitCode::kSuccess);
    } else {
      err << "dockhand discover: unexpected argument '" << args[i] << "'\n" << kDiscoverUsage;
      return toInt(ExitCode::kUsage);
    }
  }
  AgentConfig config;
  std::vector<PluginSpec> specs;
  std::map<std::string, protocol::ResourceInfo> given;
  try {
    if (files.empty() && std::filesystem::exists(DOCKHAND_DEFAULT_CONFIG)) {
      files.emplace_back(DOCKHAND_DEFAULT_CONFIG);
    }
    for (const auto& root : files) {
      for (const auto& file : configFilesFor(root)) loadConfigFile(file, config);
    }
    if (!resources_file.empty()) config.resources_file = resources_file;
    if (!config.resources_file.empty()) given = loadResourcesFile(config.resources_file);
    specs = pluginSpecs(config);
  } catch (const ConfigError& e) {
    err << "dockhand: config error: " << e.what() << "\n";
    return toInt(ExitCode::kConfigError);
  }
  spdlog::set_level(as_json ? spdlog::level::err : spdlog::level::warn);

  PluginHost host(pluginSearchPath(config), config.allow_insecure_plugins,
                  pluginCallSettings(config), pluginTrust(config));
  std::vector<std::unique_ptr<PluginDiscoverer>> discoverers;
  PluginDiscoverer* script_step = nullptr;
  try {
    auto loaded = loadPlugins(host, specs, /*create=*/false);
    if (auto step = scriptStepSpec(config, loaded)) {
      for (auto& plugin : loadPlugins(host, {*step}, /*create=*/false)) {
        loaded.push_back(std::move(plugin));
      }
    }
    for (auto& plugin : loaded) {
      if (!plugin.ok() || !plugin.library->implements(DH_KIND_RESOURCE_DISCOVERY)) continue;
      try {
        discoverers.push_back(std::make_unique<PluginDiscoverer>(PluginInstance::create(
            plugin.library, plugin.spec.config.dump(), {}, host.callLimits())));
        if (isScriptStep(plugin)) script_step = discoverers.back().get();
      } catch (const PluginLoadError& e) {
        if (plugin.spec.required) throw;
        err << "dockhand: optional plugin left out: " << e.what() << "\n";
      }
    }
  } catch (const PluginLoadError& e) {
    err << "dockhand: " << e.what() << "\n";
    return toInt(ExitCode::kPluginError);
  }
  std::vector<Discoverer*> chain_links;
  chain_links.reserve(discoverers.size());
  for (auto& d : discoverers) {
    if (d.get() != script_step) chain_links.push_back(d.get());
  }
  DiscoveryChain chain(chain_links, script_step);
  if (script_step != nullptr) chain_links.push_back(script_step);
  std::map<std::string, DiscoveredResource> found;
  try {
    found = chain.discoverAll(config.resources, given, "resources file " + config.resources_file);
  } catch (const ResourceError& e) {
    err << "dockhand: resources unavailable: " << e.what() << "\n";
    return toInt(ExitCode::kResourcesUnavailable);
  }

  json resources = json::object();
  for (const auto& [name, r] : found) {
    resources[name] = {
        {"addresses", r.info.addresses}, {"found_by", r.source}, {"requested", r.requested}};
  }
  json plugins = json::object();
  for (auto* d : chain_links) {
    PluginResult described = d->describe();
    json details = described.ok() ? json::parse(described.json, nullptr, false) : json();
    if (details.is_discarded()) details = nullptr;
    plugins[d->name()] = described.ok() ? details : json{{"error", described.error}};
  }
  std::vector<std::string> order;
  order.reserve(chain_links.size());
  for (auto* d : chain_links) order.push_back(d->name());
  if (as_json) {
    out << json{{"chain", order}, {"resources", resources}, {"plugins", plugins}}.dump(2) << "\n";
    return toInt(ExitCode::kSuccess);
  }
  out << "discovery chain: " << (order.empty() ? "(no discovery plugins)" : "")
      << fmt::format("{}", fmt::join(order, " -> ")) << "\n";
  if (found.empty()) out << "no resources requested\n";
  for (const auto& [name, r] : found) {
    out << fmt::format("{:<10} [{}]  found by {} ({} requested)\n", name,
                       fmt::join(r.info.addresses, ", "), r.source, r.requested);
  }
  for (const auto& [name, details] : plugins.items()) {
    out << name << ": " << details.dump() << "\n";
  }
  return toInt(ExitCode::kSuccess);
}

}  // namespace dockhand::agent
