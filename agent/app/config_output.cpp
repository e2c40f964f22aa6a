// The effective config as a config file would hold it (configToJson), and the redaction of
// secrets before it is printed (`dockhand config`).
#include <algorithm>
#include <cctype>

#include "app/agent_config.h"

namespace dockhand::agent {

using nlohmann::json;

namespace {

// Each entry as it would be written: a name, or {"name", "config"} when it has a config.
json migrationToJson(const std::vector<MigrationEntry>& entries) {
  json out = json::array();
  for (const MigrationEntry& entry : entries) {
    if (entry.config.is_null()) {
      out.push_back(entry.name);
    } else {
      out.push_back({{"name", entry.name}, {"config", entry.config}});
    }
  }
  return out;
}

}  // namespace

json configToJson(const AgentConfig& config) {
  json resources = json::object();
  for (const auto& [name, request] : config.resources) {
    json r = {{"amount", request.amount}};
    if (!request.discovery_script.empty()) r["discovery_script"] = request.discovery_script;
    if (!request.vendor.empty()) r["vendor"] = request.vendor;
    resources[name] = std::move(r);
  }
  json plugins = json::array();
  for (const PluginEntry& entry : config.plugins) {
    json p = json::object();
    if (!entry.name.empty()) p["name"] = entry.name;
    if (!entry.path.empty()) p["path"] = entry.path;
    p["required"] = entry.required;
    p["config"] = entry.config;
    plugins.push_back(std::move(p));
  }
  return json{
      {"driver_url", config.driver_url},
      {"executor_id", config.executor_id},
      {"bind_address", config.bind_address},
      {"hostname", config.hostname},
      {"cores", config.cores},
      {"resources_file", config.resources_file},
      {"app_id", config.app_id},
      {"worker_url", config.worker_url},
      {"resource_profile_id", config.resource_profile_id},
      {"work_dir", config.work_dir},
      {"log_level", config.log_level},
      {"log_format", config.log_format},
      {"plugin_dirs", config.plugin_dirs},
      {"plugins", std::move(plugins)},
      {"connect_tries", config.connect_tries},
      {"connect_retry_delay_ms", config.connect_retry_delay_ms},
      {"reconnect_timeout_ms", config.reconnect_timeout_ms},
      {"ask_timeout_ms", config.ask_timeout_ms},
      {"stop_grace_ms", config.stop_grace_ms},
      {"restart_wait_ms", config.restart_wait_ms},
      {"max_frame_bytes", config.max_frame_bytes},
      {"plugin_manifest_dir", config.plugin_manifest_dir},
      {"allow_insecure_plugins", config.allow_insecure_plugins},
      {"plugin_trust",
       {{"policy", toString(config.plugin_trust.policy)},
        {"catalogs",
         [&config] {
           std::vector<std::string> paths;
           for (const auto& c : config.plugin_trust.catalogs) paths.push_back(c.string());
           return paths;
         }()},
        {"keys_dir", config.plugin_trust.keys_dir.string()}}},
      {"allow_profile_discovery_scripts", config.allow_profile_discovery_scripts},
      {"plugin_call_warn_ms", config.plugin_call_warn_ms},
      {"plugin_call_timeout_ms", config.plugin_call_timeout_ms},
      {"keep_task_dirs", config.keep_task_dirs},
      {"resources", std::move(resources)},
      {"block_port", config.block_port},
      {"fallback_dir", config.fallback_dir},
      {"auth_secret_file", config.auth_secret_file},
      {"tls", tls::tlsConfigToJson(config.tls)},
      {"decommission",
       {{"enabled", config.decommission.enabled},
        {"signal", config.decommission.signal},
        {"migration", migrationToJson(config.decommission.migration)},
        {"shuffle_blocks", config.decommission.shuffle_blocks},
        {"rdd_blocks", config.decommission.rdd_blocks},
        {"task_blocks", config.decommission.task_blocks},
        {"deadline_ms", config.decommission.deadline_ms},
        {"check_interval_ms", config.decommission.check_interval_ms},
        {"max_concurrent", config.decommission.max_concurrent},
        {"bandwidth_bytes_per_s", config.decommission.bandwidth_bytes_per_s},
        {"max_failures_per_block", config.decommission.max_failures_per_block}}},
  };
}

json redactSecrets(json value) {
  if (value.is_array()) {
    for (auto& item : value) item = redactSecrets(std::move(item));
    return value;
  }
  if (!value.is_object()) return value;
  for (auto& item : value.items()) {
    std::string key = item.key();
    std::transform(key.begin(), key.end(), key.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    if (key.find("secret") != std::string::npos || key.find("token") != std::string::npos ||
        key.find("password") != std::string::npos) {
      item.value() = "<redacted>";
    } else {
      item.value() = redactSecrets(std::move(item.value()));
    }
  }
  return value;
}

}  // namespace dockhand::agent
