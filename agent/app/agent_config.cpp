#include "app/agent_config.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <Poco/Exception.h>
#include <Poco/URI.h>
#include <fmt/format.h>

#include "app/log_setup.h"
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
    "plugin_dirs",
    "plugins",
    "connect_tries",
    "connect_retry_delay_ms",
    "ask_timeout_ms",
    "stop_grace_ms",
    "max_frame_bytes",
    "plugin_manifest_dir",
    "allow_insecure_plugins",
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
    return guard([&] { return reader_.optionalStringList(key); }, fallback);
  }
  std::map<std::string, std::string> optionalStringMap(
      std::string_view key, std::map<std::string, std::string> fallback) {
    return guard([&] { return reader_.optionalStringMap(key); }, fallback);
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

// The origin of the value at `path`: its own entry or the nearest one above it.
std::string originOf(const ConfigOrigins& origins, std::string path) {
  while (true) {
    if (auto it = origins.find(path); it != origins.end()) return it->second;
    auto slash = path.rfind('/');
    if (slash == std::string::npos || path.empty()) return "default";
    path.resize(slash);
  }
}

std::string sourceName(const std::string& origin) {
  if (origin.rfind("file:", 0) == 0) return origin.substr(5);
  return origin;
}

std::string readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError(fmt::format("{}: cannot read: {}", path, std::strerror(errno)));
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

json parseJson(const std::string& text, const std::string& origin) {
  try {
    return json::parse(text);
  } catch (const json::parse_error& e) {
    // e.byte is the 1-based offset of the error; turn it into a line number.
    std::size_t line = 1;
    for (std::size_t i = 0; i + 1 < e.byte && i < text.size(); ++i) line += text[i] == '\n';
    std::string what = e.what();
    if (auto pos = what.find("parse error"); pos != std::string::npos) what = what.substr(pos);
    throw ConfigError(
        {ConfigProblem{origin, "", fmt::format("line {}: invalid JSON: {}", line, what)}});
  } catch (const json::exception& e) {
    // A number too large for a double ("1e600") is an out_of_range, not a parse_error.
    std::string what = e.what();
    if (auto pos = what.find("] "); pos != std::string::npos) what = what.substr(pos + 2);
    throw ConfigError({ConfigProblem{origin, "", "invalid JSON: " + what}});
  }
}

int parsePositiveInt(const std::string& option, const std::string& value, int min) {
  int out = 0;
  auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), out);
  if (ec != std::errc() || end != value.data() + value.size() || out < min) {
    throw ConfigError(fmt::format("--{}: expected an integer >= {}, got '{}'", option, min, value));
  }
  return out;
}

std::string machineHostname() {
  char buffer[256] = {};
  if (gethostname(buffer, sizeof buffer - 1) != 0 || buffer[0] == '\0') return "localhost";
  return buffer;
}

}  // namespace

int decommissionSignalNumber(const std::string& name) {
  std::string_view n(name);
  if (n.substr(0, 3) == "SIG") n.remove_prefix(3);
  static const std::map<std::string, int, std::less<>> kUsable = {
      {"PWR", SIGPWR},     {"USR1", SIGUSR1},     {"USR2", SIGUSR2},
      {"WINCH", SIGWINCH}, {"URG", SIGURG},       {"XCPU", SIGXCPU},
      {"XFSZ", SIGXFSZ},   {"VTALRM", SIGVTALRM}, {"PROF", SIGPROF}};
  auto it = kUsable.find(n);
  return it == kUsable.end() ? 0 : it->second;
}

const std::vector<std::string>& configKeys() {
  static const std::vector<std::string> keys(kKeys.begin(), kKeys.end());
  return keys;
}

std::string ConfigProblem::text() const {
  std::string out = origin;
  if (!path.empty()) out += (out.empty() ? "" : ": ") + path;
  if (!message.empty()) out += (out.empty() ? "" : ": ") + message;
  return out;
}

namespace {
std::string joinProblems(const std::vector<ConfigProblem>& problems) {
  std::string out;
  for (const auto& p : problems) out += (out.empty() ? "" : "\n") + p.text();
  return out;
}
}  // namespace

ConfigError::ConfigError(std::vector<ConfigProblem> problems)
    : std::runtime_error(joinProblems(problems)), problems_(std::move(problems)) {}

void loadConfigJson(const std::string& text, const std::string& origin, AgentConfig& config,
                    ConfigOrigins* origins) {
  json root = parseJson(text, origin);
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
    if (r.has("plugin_dirs")) config.plugin_dirs = r.optionalStringList("plugin_dirs");
    config.connect_tries =
        static_cast<int>(r.optionalInt("connect_tries", config.connect_tries, 1, 1000));
    config.connect_retry_delay_ms =
        r.optionalInt("connect_retry_delay_ms", config.connect_retry_delay_ms, 0, 3600000);
    config.ask_timeout_ms = r.optionalInt("ask_timeout_ms", config.ask_timeout_ms, 1, 3600000);
    config.stop_grace_ms = r.optionalInt("stop_grace_ms", config.stop_grace_ms, 0, 3600000);
    config.max_frame_bytes =
        r.optionalInt("max_frame_bytes", config.max_frame_bytes, 4096, 1LL << 30);
    config.plugin_manifest_dir =
        r.optionalString("plugin_manifest_dir", config.plugin_manifest_dir);
    config.allow_insecure_plugins =
        r.optionalBool("allow_insecure_plugins", config.allow_insecure_plugins);
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
        q.fail("signal", fmt::format("'{}' is not a usable signal (e.g. SIGPWR, SIGUSR1, SIGUSR2, "
                                     "SIGWINCH)",
                                     dc.signal));
      }
      if (q.has("migration")) dc.migration = q.optionalStringList("migration", dc.migration);
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
  loadConfigJson(readFile(path), path, config, origins);
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

const std::vector<EnvironmentOverride>& environmentOverrides() {
  static const std::vector<EnvironmentOverride> kOverrides = {
      {"DOCKHAND_DRIVER_URL", "driver-url"},
      {"DOCKHAND_EXECUTOR_ID", "executor-id"},
      {"DOCKHAND_APP_ID", "app-id"},
      {"DOCKHAND_CORES", "cores"},
      {"DOCKHAND_WORK_DIR", "work-dir"},
      {"DOCKHAND_LOG_LEVEL", "log-level"},
      {"DOCKHAND_AUTH_SECRET_FILE", "auth-secret-file"},
  };
  return kOverrides;
}

std::string optionKey(const std::string& option) {
  if (option == "resourcesFile") return "resources_file";
  if (option == "resourceProfileId") return "resource_profile_id";
  if (option == "plugin-dir") return "plugin_dirs";
  std::string key = option;
  std::replace(key.begin(), key.end(), '-', '_');
  return key;
}

void applyEnvironmentOverrides(const std::vector<std::string>& environment, AgentConfig& config,
                               ConfigOrigins* origins) {
  std::vector<ConfigProblem> problems;
  for (const auto& o : environmentOverrides()) {
    std::string prefix = std::string(o.variable) + "=";
    for (const std::string& entry : environment) {
      if (entry.rfind(prefix, 0) != 0) continue;
      try {
        applyOption(o.option, entry.substr(prefix.size()), config);
        if (origins != nullptr)
          (*origins)["/" + optionKey(o.option)] = std::string("env:") + o.variable;
      } catch (const ConfigError& e) {
        // "--cores: expected ..." -> "env:DOCKHAND_CORES: expected ..."
        std::string what = e.what();
        if (auto colon = what.find(": "); colon != std::string::npos) what = what.substr(colon + 2);
        problems.push_back(ConfigProblem{std::string("env:") + o.variable, "", what});
      }
    }
  }
  if (!problems.empty()) throw ConfigError(std::move(problems));
}

void loadConfig(const ConfigSources& sources, AgentConfig& config, ConfigOrigins* origins) {
  ConfigOrigins local;
  ConfigOrigins& seen = origins != nullptr ? *origins : local;
  std::vector<ConfigProblem> problems;
  auto collect = [&](auto&& step) {
    try {
      step();
    } catch (const ConfigError& e) {
      problems.insert(problems.end(), e.problems().begin(), e.problems().end());
    }
  };
  for (const std::string& file : sources.files) {
    for (const std::string& path : configFilesFor(file)) {
      collect([&] { loadConfigFile(path, config, &seen); });
    }
  }
  collect([&] { applyEnvironmentOverrides(sources.environment, config, &seen); });
  for (const auto& [name, value] : sources.options) {
    collect([&, &n = name, &v = value] {
      applyOption(n, v, config);
      seen["/" + optionKey(n)] = "cli";
    });
  }
  // The whole-config rules too, so that one run reports everything; but a required key may be
  // missing only because the file that sets it has a problem: that is reported once fixed.
  bool sources_failed = !problems.empty();
  for (auto& problem : checkConfig(config, seen)) {
    if (sources_failed && problem.message.rfind("is required", 0) == 0) continue;
    // A problem with no source (a required key nobody set) belongs to the first config file.
    if (problem.origin.empty() && !sources.files.empty()) problem.origin = sources.files.front();
    problems.push_back(std::move(problem));
  }
  if (!problems.empty()) throw ConfigError(std::move(problems));
}

std::vector<ConfigProblem> checkConfig(const AgentConfig& config, const ConfigOrigins& origins) {
  std::vector<ConfigProblem> problems;
  auto problem = [&](const std::string& key, std::string message) {
    std::string path = "/" + key;
    std::string origin = originOf(origins, path);
    problems.push_back(ConfigProblem{origin == "default" ? std::string() : sourceName(origin), path,
                                     std::move(message)});
  };
  for (const std::string& option : missingRequired(config)) {
    std::string name = option.substr(2);
    std::string variable;
    for (const auto& o : environmentOverrides()) {
      if (name == o.option) variable = std::string(", ") + o.variable;
    }
    problem(optionKey(name),
            fmt::format("is required (set it in a config file{} or {})", variable, option));
  }
  // With TLS on the driver is reached with wss://, without it with ws://: a URL that says
  // otherwise is a mistake better caught here than as a handshake failure.
  const std::string scheme = config.tls.enabled ? "wss" : "ws";
  if (!config.driver_url.empty()) {
    try {
      Poco::URI uri(config.driver_url);
      // The port is required: a driver has no well-known port (ws:// alone would mean 80).
      if ((uri.getScheme() != "ws" && uri.getScheme() != "wss") || uri.getHost().empty() ||
          uri.getSpecifiedPort() == 0) {
        problem("driver_url",
                fmt::format("expected {}://HOST:PORT/, got '{}'", scheme, config.driver_url));
      } else if (uri.getScheme() != scheme) {
        problem("driver_url",
                config.tls.enabled
                    ? fmt::format("is '{}', but tls is on: the driver is reached with "
                                  "wss://HOST:PORT/",
                                  config.driver_url)
                    : fmt::format("is '{}', a wss:// URL, but tls is off: set up the tls "
                                  "section (docs/security.md) or use ws://",
                                  config.driver_url));
      }
    } catch (const Poco::Exception& e) {
      problem("driver_url", fmt::format("expected {}://HOST:PORT/, got '{}': {}", scheme,
                                        config.driver_url, e.displayText()));
    }
  }
  // The agent serves TLS: its block server is https:// with TLS on.
  for (auto& [key, message] : tls::tlsConfigProblems(config.tls, /*serves=*/true)) {
    problem("tls/" + key, message);
  }
  if (!parseLogLevel(config.log_level)) {
    problem("log_level", fmt::format("unknown level '{}' (trace, debug, info, warn, error, "
                                     "critical, off)",
                                     config.log_level));
  }
  return problems;
}

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
      {"plugin_dirs", config.plugin_dirs},
      {"plugins", std::move(plugins)},
      {"connect_tries", config.connect_tries},
      {"connect_retry_delay_ms", config.connect_retry_delay_ms},
      {"ask_timeout_ms", config.ask_timeout_ms},
      {"stop_grace_ms", config.stop_grace_ms},
      {"max_frame_bytes", config.max_frame_bytes},
      {"plugin_manifest_dir", config.plugin_manifest_dir},
      {"allow_insecure_plugins", config.allow_insecure_plugins},
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
        {"migration", config.decommission.migration},
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

void applyOption(const std::string& name, const std::string& value, AgentConfig& config) {
  if (name == "driver-url") {
    config.driver_url = value;
  } else if (name == "executor-id") {
    config.executor_id = value;
  } else if (name == "bind-address") {
    config.bind_address = value;
  } else if (name == "hostname") {
    config.hostname = value;
  } else if (name == "cores") {
    config.cores = parsePositiveInt(name, value, 1);
  } else if (name == "resourcesFile") {
    config.resources_file = value;
  } else if (name == "app-id") {
    config.app_id = value;
  } else if (name == "worker-url") {
    config.worker_url = value;
  } else if (name == "resourceProfileId") {
    config.resource_profile_id = parsePositiveInt(name, value, 0);
  } else if (name == "work-dir") {
    config.work_dir = value;
  } else if (name == "log-level") {
    config.log_level = value;
  } else if (name == "plugin-dir") {
    config.plugin_dirs.push_back(value);
  } else if (name == "auth-secret-file") {
    config.auth_secret_file = value;
  } else {
    throw ConfigError(fmt::format("--{}: not a config option", name));
  }
}

void applyEnvironment(const std::vector<std::string>& environment, AgentConfig& config) {
  struct Prefix {
    std::string_view text;
    bool url;
    int rank;  // higher wins
  };
  constexpr Prefix kPrefixes[] = {{"SPARK_LOG_URL_", true, 0},
                                  {"DOCKHAND_LOG_URL_", true, 1},
                                  {"SPARK_EXECUTOR_ATTRIBUTE_", false, 0},
                                  {"DOCKHAND_EXECUTOR_ATTRIBUTE_", false, 1}};
  std::map<std::string, int> url_rank;
  std::map<std::string, int> attribute_rank;
  for (const std::string& entry : environment) {
    auto eq = entry.find('=');
    if (eq == std::string::npos) continue;
    std::string_view key(entry.data(), eq);
    std::string value = entry.substr(eq + 1);
    for (const Prefix& prefix : kPrefixes) {
      if (key.size() <= prefix.text.size() || key.substr(0, prefix.text.size()) != prefix.text) {
        continue;
      }
      std::string name(key.substr(prefix.text.size()));
      for (char& c : name) {
        c = static_cast<char>(prefix.url ? std::tolower(static_cast<unsigned char>(c))
                                         : std::toupper(static_cast<unsigned char>(c)));
      }
      auto& ranks = prefix.url ? url_rank : attribute_rank;
      auto& target = prefix.url ? config.log_urls : config.attributes;
      auto it = ranks.find(name);
      if (it == ranks.end() || it->second <= prefix.rank) {
        ranks[name] = prefix.rank;
        target[name] = value;
      }
    }
  }
}

void applyDefaults(AgentConfig& config) {
  if (config.hostname.empty()) config.hostname = machineHostname();
  if (config.bind_address.empty()) config.bind_address = config.hostname;
  if (config.work_dir.empty()) {
    const char* tmp = std::getenv("TMPDIR");
    std::string base = (tmp != nullptr && *tmp != '\0') ? tmp : "/tmp";
    config.work_dir =
        fmt::format("{}/dockhand/{}/{}", base, config.app_id.empty() ? "app" : config.app_id,
                    config.executor_id.empty() ? "executor" : config.executor_id);
  }
}

std::vector<std::string> missingRequired(const AgentConfig& config) {
  std::vector<std::string> missing;
  if (config.driver_url.empty()) missing.emplace_back("--driver-url");
  if (config.executor_id.empty()) missing.emplace_back("--executor-id");
  if (config.app_id.empty()) missing.emplace_back("--app-id");
  return missing;
}

std::map<std::string, protocol::ResourceInfo> loadResourcesFile(const std::string& path) {
  return parseResourcesJson(readFile(path), path);
}

std::map<std::string, protocol::ResourceInfo> parseResourcesJson(const std::string& text,
                                                                 const std::string& origin) {
  json root = parseJson(text, origin);
  std::map<std::string, protocol::ResourceInfo> out;
  try {
    if (!root.is_array()) {
      throw JsonPathError("", "expected an array of resource allocations");
    }
    for (std::size_t i = 0; i < root.size(); ++i) {
      JsonReader entry(root[i], "/" + std::to_string(i));
      JsonReader id = entry.requiredObject("id");
      protocol::ResourceInfo info;
      info.name = id.requiredString("resourceName");
      info.addresses = entry.optionalStringList("addresses");
      if (out.count(info.name) != 0) {
        throw JsonPathError(id.childPath("resourceName"),
                            fmt::format("resource '{}' is allocated twice", info.name));
      }
      std::set<std::string> seen;
      for (const auto& address : info.addresses) {
        if (!seen.insert(address).second) {
          throw JsonPathError(entry.childPath("addresses"),
                              fmt::format("address '{}' is listed twice", address));
        }
      }
      out.emplace(info.name, std::move(info));
    }
  } catch (const JsonPathError& e) {
    throw ConfigError(fmt::format("{}: {}: {}", origin, e.path(), e.detail()));
  }
  return out;
}

}  // namespace dockhand::agent
