#include "plugins/plugin_host.h"

#include <spdlog/spdlog.h>

namespace dockhand::agent {
namespace {

bool isPath(const std::string& name_or_path) {
  return name_or_path.find('/') != std::string::npos ||
         (name_or_path.size() > 3 && name_or_path.compare(name_or_path.size() - 3, 3, ".so") == 0);
}

}  // namespace

PluginHost::PluginHost(std::vector<std::filesystem::path> plugin_dirs, bool allow_insecure,
                       PluginCallSettings limits, PluginTrust trust)
    : plugin_dirs_(std::move(plugin_dirs)),
      allow_insecure_(allow_insecure),
      trust_(std::move(trust)),
      call_limits_(std::move(limits)) {}

std::filesystem::path PluginHost::locate(const std::string& name_or_path) const {
  if (name_or_path.empty()) throw PluginLoadError("plugin '': empty plugin name");
  if (isPath(name_or_path)) return name_or_path;
  const std::string file = "dockhand-" + name_or_path + ".so";
  std::error_code ec;
  for (const auto& dir : plugin_dirs_) {
    auto candidate = dir / file;
    if (std::filesystem::exists(candidate, ec)) return candidate;
  }
  std::string searched;
  for (const auto& dir : plugin_dirs_) {
    searched += (searched.empty() ? "" : ", ") + dir.string();
  }
  throw PluginLoadError("plugin '" + name_or_path + "': no " + file + " in " +
                        (searched.empty() ? "(no plugin directories configured)" : searched));
}

void PluginHost::add(std::shared_ptr<const PluginLibrary> library) {
  std::lock_guard lock(mutex_);
  if (auto it = by_name_.find(library->name()); it != by_name_.end()) {
    throw PluginLoadError(library->label() + ": duplicate plugin name '" + library->name() +
                          "' (already loaded from " + it->second->path().string() + ")");
  }
  by_name_.emplace(library->name(), std::move(library));
}

std::shared_ptr<const PluginLibrary> PluginHost::load(const std::string& name_or_path) {
  if (!isPath(name_or_path)) {
    std::lock_guard lock(mutex_);
    if (auto it = by_name_.find(name_or_path); it != by_name_.end()) return it->second;
  }
  const std::filesystem::path path = locate(name_or_path);
  std::error_code ec;
  std::filesystem::path key = std::filesystem::weakly_canonical(path, ec);
  if (ec) key = path;

  std::lock_guard lock(mutex_);
  if (auto it = by_path_.find(key); it != by_path_.end()) return it->second;
  auto library = PluginLibrary::open(path, allow_insecure_, trust_);
  if (!isPath(name_or_path) && library->name() != name_or_path) {
    throw PluginLoadError("plugin '" + path.string() + "': declares the name '" + library->name() +
                          "', expected '" + name_or_path + "'");
  }
  if (auto it = by_name_.find(library->name()); it != by_name_.end()) {
    throw PluginLoadError("plugin '" + path.string() + "': duplicate plugin name '" +
                          library->name() + "' (already loaded from " +
                          it->second->path().string() + ")");
  }
  by_path_.emplace(key, library);
  by_name_.emplace(library->name(), library);
  spdlog::info("loaded {} version {}", library->label(), library->version());
  return library;
}

std::shared_ptr<PluginInstance> PluginHost::create(const std::string& name_or_path,
                                                   const std::string& config_json,
                                                   PluginCallbacks callbacks) {
  return PluginInstance::create(load(name_or_path), config_json, std::move(callbacks),
                                call_limits_);
}

std::unique_ptr<TaskRunnerPlugin> PluginHost::createTaskRunner(const std::string& name_or_path,
                                                               const std::string& config_json,
                                                               TaskStatusCallback on_status) {
  auto library = load(name_or_path);
  if (!library->implements(DH_KIND_TASK_RUNNER)) {
    throw PluginLoadError(library->label() + ": not a task runner");
  }
  PluginCallbacks callbacks;
  callbacks.task_status = std::move(on_status);
  // A runner may load code of its own (the library runner's job libraries): the same policy.
  callbacks.verify_code = [trust = trust_](int fd, const std::string& path) {
    return verifyDescriptor(trust, fd, path);
  };
  return std::make_unique<TaskRunnerPlugin>(
      PluginInstance::create(std::move(library), config_json, std::move(callbacks), call_limits_));
}

std::unique_ptr<ResourceDiscoveryPlugin> PluginHost::createResourceDiscovery(
    const std::string& name_or_path, const std::string& config_json) {
  auto library = load(name_or_path);
  if (!library->implements(DH_KIND_RESOURCE_DISCOVERY)) {
    throw PluginLoadError(library->label() + ": not a resource discovery plugin");
  }
  return std::make_unique<ResourceDiscoveryPlugin>(
      PluginInstance::create(std::move(library), config_json, {}, call_limits_));
}

std::unique_ptr<BlockMigrationPlugin> PluginHost::createBlockMigration(
    const std::string& name_or_path, const std::string& config_json,
    MigrationProgressCallback on_progress, RequestSigner sign_request) {
  auto library = load(name_or_path);
  if (!library->implements(DH_KIND_BLOCK_MIGRATION)) {
    throw PluginLoadError(library->label() + ": not a block migration plugin");
  }
  PluginCallbacks callbacks;
  callbacks.migration_progress = std::move(on_progress);
  callbacks.sign_request = std::move(sign_request);
  return std::make_unique<BlockMigrationPlugin>(
      PluginInstance::create(std::move(library), config_json, std::move(callbacks), call_limits_));
}

}  // namespace dockhand::agent
