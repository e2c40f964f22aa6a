// Reading one config source: a JSON config file (or text) over an AgentConfig, and the files
// that `--config FILE` stands for. The layering of every source is in config_layers.cpp, the
// whole-config rules in config_check.cpp, the effective-config output in config_output.cpp.
#include "app/agent_config.h"

#include <csignal>
#include <filesystem>
#include <set>

#include <fmt/format.h>

#include "dockhand/base/config_file.h"
#include "dockhand/protocol/json_reader.h"

namespace dockhand::agent {

using nlohmann::json;
using protocol::JsonPathError;
using protocol::JsonReader;

namespace {

const std::set<std::string, std::less<>> kKeys = {
    "driver_url",
    "executor_id",
    "bind_address",
    "hostname",
    "cores",
    "resources_file",
    "app_id",
    "worker_url",
    "resource_profile_id",
    "work_dir",
    "log_level",
    "log_format",
    "plugin_dirs",
    "plugins",
    "connect_tries",
    "connect_retry_delay_ms",
    "reconnect_timeout_ms",
    "ask_timeout_ms",
    "stop_grace_ms",
    "restart_wait_ms",
    "max_frame_bytes",
    "plugin_manifest_dir",
    "allow_insecure_plugins",
    "plugin_trust",
    "allow_profile_discovery_scripts",
    "plugin_call_warn_ms",
    "plugin_call_timeout_ms",
    "keep_task_dirs",
    "resources",
    "block_port",
    "fallback_dir",
    "decommission",
    "auth_secret_file",
    "tls",
};

const std::set<std::string, std::less<>> kPluginTrustKeys = {"policy", "catalogs", "keys_dir"};

const std::set<std::string, std::less<>> kDecommissionKeys = {
    "enabled",
    "signal",
    "migration",
    "shuffle_blocks",
    "rdd_blocks",
    "task_blocks",
    "deadline_ms",
    "check_interval_ms",
    "max_concurrent",
    "bandwidth_bytes_per_s",
    "max_failures_per_block",
};

const std::set<std::string, std::less<>> kResourceKeys = {"amount", "discovery_script", "vendor"};

const std::set<std::string, std::less<>> kPluginKeys = {"name", "path", "required", "config"};
const std::set<std::string, std::less<>> kMigrationKeys = {"name", "config"};

// A JsonReader that, instead of stopping at the first bad value, records each problem and
// goes on with the value it had (so that one pass over a file reports all of its problems).
class ConfigReader {
 public:
  ConfigReader(const json& object, std::string path, std::vector<JsonPathError>& problems)
      : reader_(object, std::move(path)), object_(object), problems_(problems) {}

  const std::string& path() const { return reader_.path(); }
  bool has(std::string_view key) const { return reader_.has(key); }
  const json* find(std::string_view key) const { return reader_.find(key); }
  void fail(std::string_view key, const std::string& what) {
    problems_.emplace_back(reader_.childPath(key), what);
  }

  std::string optionalString(std::string_view key, std::string fallback = {}) {
    return guard([&] { return reader_.optionalString(key, fallback); }, fallback);
  }
  std::int64_t optionalInt(std::string_view key, std::int64_t fallback, std::int64_t min,
                           std::int64_t max) {
    return guard([&] { return reader_.optionalInt(key, fallback, min, max); }, fallback);
  }
  bool optionalBool(std::string_view key, bool fallback) {
    return guard([&] { return reader_.optionalBool(key, fallback); }, fallback);
  }
  std::vector<std::string> optionalStringList(std::string_view key,
                                              std::vector<std::string> fallback = {}) {
    return guard([&] { return reader_.optionalStringList(key); }, std::move(fallback));
  }
  std::map<std::string, std::string> optionalStringMap(
      std::string_view key, std::map<std::string, std::string> fallback) {
    return guard([&] { return reader_.optionalStringMap(key); }, std::move(fallback));
  }
  // The member `key` as an object, or nullptr (with a problem recorded) when it is something
  // else. Absent: nullptr, no problem.
  const json* object(std::string_view key) {
    const json* v = find(key);
    if (v != nullptr && !v->is_object()) {
      fail(key, fmt::format("expected an object, got {}", v->type_name()));
      return nullptr;
    }
    return v;
  }
  // One problem per unknown member.
  void rejectUnknown(const std::set<std::string, std::less<>>& known) {
    for (const auto& item : object_.items()) {
      if (known.count(item.key()) != 0) continue;
      std::string list;
      for (const auto& name : known) list += (list.empty() ? "" : ", ") + name;
      fail(item.key(), fmt::format("unknown key (known keys: {})", list));
    }
  }

 private:
  template <typename Read, typename T>
  T guard(Read read, T fallback) {
    try {
      return read();
    } catch (const JsonPathError& e) {
      problems_.push_back(e);
      return fallback;
    }
  }

  JsonReader reader_;
  const json& object_;
  std::vector<JsonPathError>& problems_;
};

// "decommission.migration": plugin names, or {"name", "config"} objects.
std::vector<MigrationEntry> readMigration(const json& list, ConfigReader& decommission,
                                          std::vector<JsonPathError>& problems) {
  std::vector<MigrationEntry> out;
  if (!list.is_array()) {
    decommission.fail("migration", fmt::format("expected an array of plugin names or "
                                               "{{\"name\", \"config\"}} objects, got {}",
                                               list.type_name()));
    return out;
  }
  for (std::size_t i = 0; i < list.size(); ++i) {
    const json& item = list[i];
    const std::string at = decommission.path() + "/migration/" + std::to_string(i);
    if (item.is_string() && !item.get<std::string>().empty()) {
      out.push_back(MigrationEntry{item.get<std::string>()});
      continue;
    }
    if (!item.is_object()) {
      problems.emplace_back(at,
                            fmt::format("expected a plugin name or a {{\"name\", \"config\"}} "
                                        "object, got {}",
                                        item.is_string() ? "an empty string" : item.type_name()));
      continue;
    }
    ConfigReader e(item, at, problems);
    e.rejectUnknown(kMigrationKeys);
    MigrationEntry entry{e.optionalString("name")};
    if (!e.has("name")) {
      problems.emplace_back(at, "a migration entry needs a name");
    } else if (entry.name.empty() && item["name"].is_string()) {
      e.fail("name", "must not be empty");
    }
    if (const json* c = e.object("config")) entry.config = *c;
    out.push_back(std::move(entry));
  }
  return out;
}

// Records in `origins` each value `value` sets, under `path`: objects member by member (they
// merge), anything else (arrays included: they replace) as one value.
void recordOrigins(const json& value, const std::string& path, const std::string& origin,
                   ConfigOrigins& origins) {
  if (!value.is_object() || value.empty()) {
    // A value replaces whatever was recorded below it.
    auto it = origins.lower_bound(path + "/");
    while (it != origins.end() && it->first.compare(0, path.size() + 1, path + "/") == 0) {
      it = origins.erase(it);
    }
    origins[path] = origin;
    return;
  }
  for (const auto& item : value.items()) {
    recordOrigins(item.value(), path + "/" + protocol::escapePointerToken(item.key()), origin,
                  origins);
  }
}

}  // namespace

PluginTrust defaultPluginTrust() {
  PluginTrust trust;
  trust.catalogs = {DOCKHAND_PLUGIN_CATALOG, "/etc/dockhand/plugins.sha256"};
  trust.keys_dir = "/etc/dockhand/trusted-keys";
  return trust;
}

int decommissionSignalNumber(const std::string& name) {
  std::string_view n(name);
  if (n.substr(0, 3) == "SIG") n.remove_prefix(3);
  static const std::map<std::string, int, std::less<>> kUsable = {
      {"PWR", SIGPWR},   {"USR1", SIGUSR1}, {"WINCH", SIGWINCH},   {"URG", SIGURG},
      {"XCPU", SIGXCPU}, {"XFSZ", SIGXFSZ}, {"VTALRM", SIGVTALRM}, {"PROF", SIGPROF}};
  auto it = kUsable.find(n);
  return it == kUsable.end() ? 0 : it->second;
}

const std::vector<std::string>& configKeys() {
  static const std::vector<std::string> kKeyList(kKeys.begin(), kKeys.end());
  return kKeyList;
}
void loadConfigJson(const std::string& text, const std::string& origin, AgentConfig& config,
                    ConfigOrigins* origins) {
  json root = parseConfigJson(text, origin);
  if (!root.is_object()) {
    throw ConfigError(
        {ConfigProblem{origin, "/", fmt::format("expected an object, got {}", root.type_name())}});
  }
  std::vector<JsonPathError> problems;
  {
    ConfigReader r(root, "", problems);
    r.rejectUnknown(kKeys);
    config.driver_url = r.optionalString("driver_url", config.driver_url);
    config.executor_id = r.optionalString("executor_id", config.executor_id);
    config.bind_address = r.optionalString("bind_address", config.bind_address);
    config.hostname = r.optionalString("hostname", config.hostname);
    config.cores = static_cast<int>(r.optionalInt("cores", config.cores, 1, 1 << 20));
    config.resources_file = r.optionalString("resources_file", config.resources_file);
    config.app_id = r.optionalString("app_id", config.app_id);
    config.worker_url = r.optionalString("worker_url", config.worker_url);
    config.resource_profile_id = static_cast<int>(
        r.optionalInt("resource_profile_id", config.resource_profile_id, 0, 1 << 30));
    config.work_dir = r.optionalString("work_dir", config.work_dir);
    config.log_level = r.optionalString("log_level", config.log_level);
    config.log_format = r.optionalString("log_format", config.log_format);
    if (r.has("plugin_dirs")) config.plugin_dirs = r.optionalStringList("plugin_dirs");
    config.connect_tries =
        static_cast<int>(r.optionalInt("connect_tries", config.connect_tries, 1, 1000));
    config.connect_retry_delay_ms =
        r.optionalInt("connect_retry_delay_ms", config.connect_retry_delay_ms, 0, 3600000);
    config.reconnect_timeout_ms =
        r.optionalInt("reconnect_timeout_ms", config.reconnect_timeout_ms, 0, 86400000);
    config.ask_timeout_ms = r.optionalInt("ask_timeout_ms", config.ask_timeout_ms, 1, 3600000);
    config.stop_grace_ms = r.optionalInt("stop_grace_ms", config.stop_grace_ms, 0, 3600000);
    config.restart_wait_ms = r.optionalInt("restart_wait_ms", config.restart_wait_ms, 0, 86400000);
    config.max_frame_bytes =
        r.optionalInt("max_frame_bytes", config.max_frame_bytes, 4096, 1LL << 30);
    config.plugin_manifest_dir =
        r.optionalString("plugin_manifest_dir", config.plugin_manifest_dir);
    config.allow_insecure_plugins =
        r.optionalBool("allow_insecure_plugins", config.allow_insecure_plugins);
    if (const json* t = r.object("plugin_trust")) {
      ConfigReader q(*t, "/plugin_trust", problems);
      q.rejectUnknown(kPluginTrustKeys);
      PluginTrust& trust = config.plugin_trust;
      const std::string policy = q.optionalString("policy", std::string(toString(trust.policy)));
      if (policy == "any" || policy == "verified") {
        trust.policy = policy == "any" ? PluginTrust::Policy::kAny : PluginTrust::Policy::kVerified;
      } else {
        q.fail("policy", fmt::format(R"(expected "any" or "verified", got '{}')", policy));
      }
      if (q.has("catalogs")) {
        const auto catalogs = q.optionalStringList("catalogs");
        trust.catalogs.assign(catalogs.begin(), catalogs.end());
      }
      trust.keys_dir = q.optionalString("keys_dir", trust.keys_dir.string());
    }
    config.allow_profile_discovery_scripts =
        r.optionalBool("allow_profile_discovery_scripts", config.allow_profile_discovery_scripts);
    config.plugin_call_warn_ms =
        r.optionalInt("plugin_call_warn_ms", config.plugin_call_warn_ms, 1, 3600000);
    config.plugin_call_timeout_ms =
        r.optionalInt("plugin_call_timeout_ms", config.plugin_call_timeout_ms, 1, 3600000);
    config.keep_task_dirs = r.optionalInt("keep_task_dirs", config.keep_task_dirs, 0, 100000000);
    config.block_port = static_cast<int>(r.optionalInt("block_port", config.block_port, 0, 65535));
    config.fallback_dir = r.optionalString("fallback_dir", config.fallback_dir);
    config.auth_secret_file = r.optionalString("auth_secret_file", config.auth_secret_file);
    if (const json* t = r.object("tls"))
      config.tls = tls::readTlsConfig(*t, "/tls", problems, config.tls);
    if (const json* d = r.object("decommission")) {
      ConfigReader q(*d, "/decommission", problems);
      q.rejectUnknown(kDecommissionKeys);
      DecommissionConfig& dc = config.decommission;
      dc.enabled = q.optionalBool("enabled", dc.enabled);
      dc.signal = q.optionalString("signal", dc.signal);
      if (q.has("signal") && decommissionSignalNumber(dc.signal) == 0) {
        q.fail("signal", fmt::format("'{}' is not a usable signal (e.g. SIGPWR, SIGUSR1, SIGWINCH; "
                                     "SIGUSR2 is the restart in place)",
                                     dc.signal));
      }
      if (const json* m = q.find("migration")) dc.migration = readMigration(*m, q, problems);
      dc.shuffle_blocks = q.optionalBool("shuffle_blocks", dc.shuffle_blocks);
      dc.rdd_blocks = q.optionalBool("rdd_blocks", dc.rdd_blocks);
      dc.task_blocks = q.optionalBool("task_blocks", dc.task_blocks);
      dc.deadline_ms = q.optionalInt("deadline_ms", dc.deadline_ms, 0, 7LL * 24 * 3600 * 1000);
      dc.check_interval_ms = q.optionalInt("check_interval_ms", dc.check_interval_ms, 10, 600000);
      dc.max_concurrent =
          static_cast<int>(q.optionalInt("max_concurrent", dc.max_concurrent, 1, 256));
      dc.bandwidth_bytes_per_s =
          q.optionalInt("bandwidth_bytes_per_s", dc.bandwidth_bytes_per_s, 0, 1LL << 40);
      dc.max_failures_per_block = static_cast<int>(
          q.optionalInt("max_failures_per_block", dc.max_failures_per_block, 1, 1000));
    }
    if (const json* resources = r.object("resources")) {
      for (const auto& [name, value] : resources->items()) {
        const std::string at = "/resources/" + protocol::escapePointerToken(name);
        if (!value.is_object()) {
          problems.emplace_back(at, fmt::format("expected an object, got {}", value.type_name()));
          continue;
        }
        ConfigReader q(value, at, problems);
        q.rejectUnknown(kResourceKeys);
        protocol::ExecutorResourceRequest request;
        request.amount = q.optionalInt("amount", 0, 0, 1 << 20);
        request.discovery_script = q.optionalString("discovery_script");
        request.vendor = q.optionalString("vendor");
        config.resources[name] = std::move(request);
      }
    }
    if (const json* plugins = r.find("plugins"); plugins != nullptr && !plugins->is_array()) {
      r.fail("plugins", "expected an array of plugin entries");
    } else if (plugins != nullptr) {
      std::vector<PluginEntry> entries;
      for (std::size_t i = 0; i < plugins->size(); ++i) {
        std::string at = "/plugins/" + std::to_string(i);
        if (!(*plugins)[i].is_object()) {
          problems.emplace_back(
              at, fmt::format("expected an object, got {}", (*plugins)[i].type_name()));
          continue;
        }
        ConfigReader p((*plugins)[i], at, problems);
        p.rejectUnknown(kPluginKeys);
        PluginEntry entry;
        entry.name = p.optionalString("name");
        entry.path = p.optionalString("path");
        if (entry.name.empty() && entry.path.empty()) {
          problems.emplace_back(at, "a plugin entry needs a name or a path");
        }
        entry.required = p.optionalBool("required", true);
        if (const json* c = p.object("config")) entry.config = *c;
        entries.push_back(std::move(entry));
      }
      config.plugins = std::move(entries);
    }
  }
  // The values that were read apply even when others were not: record where they came from.
  if (origins != nullptr) recordOrigins(root, "", "file:" + origin, *origins);
  if (!problems.empty()) {
    std::vector<ConfigProblem> out;
    out.reserve(problems.size());
    for (const auto& e : problems) out.push_back(ConfigProblem{origin, e.path(), e.detail()});
    throw ConfigError(std::move(out));
  }
}

void loadConfigFile(const std::string& path, AgentConfig& config, ConfigOrigins* origins) {
  loadConfigJson(readConfigText(path), path, config, origins);
}

std::vector<std::string> configFilesFor(const std::string& file) {
  std::vector<std::string> files{file};
  std::string base = file;
  if (base.size() > 5 && base.compare(base.size() - 5, 5, ".json") == 0)
    base.resize(base.size() - 5);
  std::filesystem::path dir(base + ".d");
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) return files;
  std::vector<std::string> fragments;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const auto& p = entry.path();
    // Editors' and dpkg's leftovers (agent.json.dpkg-old, .#x.json) are not fragments.
    if (p.extension() != ".json" || p.filename().string().front() == '.') continue;
    fragments.push_back(p.string());
  }
  std::sort(fragments.begin(), fragments.end());
  files.insert(files.end(), fragments.begin(), fragments.end());
  return files;
}

}  // namespace dockhand::agent
