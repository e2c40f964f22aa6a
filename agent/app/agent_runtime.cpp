#include "app/agent_runtime.h"

#include <unistd.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/logging.h"
#include "resources/resource_status.h"

namespace dockhand::agent {

std::vector<std::filesystem::path> pluginSearchPath(const AgentConfig& config) {
  std::vector<std::filesystem::path> dirs(config.plugin_dirs.begin(), config.plugin_dirs.end());
  std::error_code ec;
  auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) dirs.push_back(self.parent_path().parent_path() / "lib" / "dockhand" / "plugins");
  dirs.emplace_back(DOCKHAND_DEFAULT_PLUGIN_DIR);
  return dirs;
}

namespace {

// A discovery plugin's describe() answer as JSON, or {"error": why} (logged at warn).
nlohmann::json describeForStatus(Discoverer& discoverer) {
  PluginResult described = discoverer.describe();
  std::string why = described.error;
  if (described.ok()) {
    nlohmann::json details = nlohmann::json::parse(described.json, nullptr, false);
    if (!details.is_discarded()) return details;
    why = "describe() answered with malformed JSON";
  }
  logger("agent")->warn("discovery plugin '{}': {}; its details are left out of the status",
                        discoverer.name(), why);
  return {{"error", why}};
}

}  // namespace

AgentRuntime::AgentRuntime(const AgentConfig& config, EventSink& events,
                           PluginExecutor::StatusHandler on_status)
    : host_(pluginSearchPath(config), config.allow_insecure_plugins) {
  auto log = logger("agent");
  PluginInstance::setCoreHookWarnLimit(std::chrono::milliseconds(config.plugin_call_warn_ms));
  std::vector<PluginSpec> specs;
  try {
    specs = pluginSpecs(config);
  } catch (const ConfigError& e) {
    throw PluginLoadFailure(std::string("plugin manifest: ") + e.what());
  }
  plugins_ = loadPlugins(host_, specs);
  std::map<std::string, TaskRunnerFactory> runners;
  for (LoadedPlugin& plugin : plugins_) {
    if (!plugin.ok()) continue;
    log->info("{} {} loaded from {} ({})", plugin.library->label(), plugin.library->version(),
              plugin.spec.origin, fmt::join(kindNames(plugin.library->descriptor().kinds), ", "));
    if (plugin.library->implements(DH_KIND_RESOURCE_DISCOVERY)) {
      discoverers_.push_back(std::make_unique<PluginDiscoverer>(
          plugin.instance, std::chrono::milliseconds(config.plugin_call_timeout_ms)));
    }
    if (!plugin.library->implements(DH_KIND_TASK_RUNNER)) continue;
    // A runner-only instance goes to the executor alone, which destroys it (stopping its
    // threads) when it stops; one of several kinds is shared and lives as long as the runtime.
    auto instance = plugin.library->descriptor().kinds == DH_KIND_TASK_RUNNER
                        ? std::move(plugin.instance)
                        : plugin.instance;
    runners.emplace(plugin.library->name(),
                    [instance = std::move(instance),
                     target = plugin.status_target](TaskStatusCallback report) mutable {
                      target->set(std::move(report));
                      return std::make_unique<TaskRunnerPlugin>(std::move(instance));
                    });
  }
  local_requests_ = config.resources;
  resources_file_ = config.resources_file;
  executor_ = std::make_unique<PluginExecutor>(
      events,
      [this, on_status = std::move(on_status)](TaskStatusEvent event) {
        guard_->onStatus(event);  // a terminal status gives the task's addresses back
        on_status(std::move(event));
      },
      config.work_dir, config.executor_id, std::move(runners),
      std::chrono::milliseconds(config.plugin_call_timeout_ms));
  executor_->keepTaskDirs(static_cast<std::size_t>(config.keep_task_dirs));
  guard_ = std::make_unique<ResourceGuard>(*executor_);
}

std::vector<Discoverer*> AgentRuntime::discoverers() {
  std::vector<Discoverer*> out;
  for (auto& d : discoverers_) out.push_back(d.get());
  return out;
}

std::map<std::string, DiscoveredResource> AgentRuntime::discoverResources(
    const protocol::ResourceProfile& profile) {
  std::map<std::string, protocol::ResourceInfo> given;
  if (!resources_file_.empty()) given = loadResourcesFile(resources_file_);
  DiscoveryChain chain(discoverers());
  auto found = chain.discoverAll(mergeRequests(profile.executor_resources, local_requests_), given,
                                 "resources file " + resources_file_);
  guard_->setResources(found, profile.task_resources);
  // What each discovery plugin describes (an nvidia GPU's name, the host's cgroup limits),
  // asked once: a describe() may run a program, too slow for every status refresh.
  chain_.clear();
  described_.clear();
  for (Discoverer* d : discoverers()) {
    chain_.push_back(d->name());
    described_[d->name()] = describeForStatus(*d);
  }
  found_ = found;
  amount_per_task_ = profile.task_resources;
  discovered_ = true;
  return found;
}

nlohmann::json AgentRuntime::statusJson() const {
  nlohmann::json discovery = nullptr;
  if (discovered_) {
    nlohmann::json plugins = nlohmann::json::object();
    for (const auto& [name, details] : described_) plugins[name] = details;
    discovery = {{"chain", chain_}, {"plugins", std::move(plugins)}};
  }
  return {{"resources", resourceStatusJson(found_, amount_per_task_, guard_->ledger(), described_)},
          {"discovery", std::move(discovery)},
          {"plugins", pluginReport(plugins_)},
          {"stuck_runners", executor_->stuckRunners()}};
}

AgentRuntime::~AgentRuntime() {
  guard_.reset();
  executor_.reset();
  // Instances shared with other kinds outlive the executor: drop their reports from now on.
  for (auto& plugin : plugins_) {
    if (plugin.status_target) plugin.status_target->clear();
  }
}

void AgentRuntime::setRequestSigner(protocol::auth::RequestSigner signer) {
  signer_ = signer;
  executor_->setRequestSigner(std::move(signer));
}

std::vector<std::unique_ptr<BlockMigrationPlugin>> AgentRuntime::createMigrationPlugins(
    const AgentConfig& config, std::function<void(std::string_view)> on_progress) {
  const DecommissionConfig& d = config.decommission;
  std::vector<std::unique_ptr<BlockMigrationPlugin>> out;
  for (const std::string& name : d.migration) {
    nlohmann::json plugin_config = {{"max_concurrent", d.max_concurrent},
                                    {"bandwidth_bytes_per_s", d.bandwidth_bytes_per_s}};
    if (name == "peer") {
      plugin_config["max_failures_per_block"] = d.max_failures_per_block;
      // The peer plugin pushes to other agents' block servers: https:// with the agent's own
      // TLS settings when TLS is on (docs/plugins.md).
      if (config.tls.enabled) {
        plugin_config["tls"] = {{"ca_file", config.tls.ca_file},
                                {"certificate_file", config.tls.certificate_file},
                                {"private_key_file", config.tls.private_key_file},
                                {"verify_hostname", config.tls.verify_hostname}};
      }
    } else if (name == "fallback") {
      if (config.fallback_dir.empty()) {
        throw PluginLoadFailure(
            "decommission.migration names 'fallback' but fallback_dir is not set");
      }
      plugin_config["dir"] = config.fallback_dir;
    } else {
      plugin_config = nlohmann::json::object();  // a third-party plugin: its own defaults
    }
    auto log = logger("decommission");
    out.push_back(host_.createBlockMigration(
        name, plugin_config.dump(),
        [log, name, on_progress](std::string_view progress) {
          log->debug("{}: {}", name, progress);
          if (on_progress) on_progress(progress);
        },
        signer_));
    log->info("block migration plugin {} ready", name);
  }
  return out;
}

}  // namespace dockhand::agent
