#include "app/agent_config.h"

#include <unistd.h>

#include <charconv>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "dockhand/protocol/json_reader.h"

namespace dockhand::agent {

using nlohmann::json;
using protocol::JsonPathError;
using protocol::JsonReader;

namespace {

const std::set<std::string, std::less<>> kKeys = {
    "driver_url",     "executor_id",   "bind_address",
    "hostname",       "cores",         "resources_file",
    "app_id",         "worker_url",    "resource_profile_id",
    "work_dir",       "log_level",     "plugin_dirs",
    "plugins",        "connect_tries", "connect_retry_delay_ms",
    "ask_timeout_ms", "stop_grace_ms", "max_frame_bytes",
};

const std::set<std::string, std::less<>> kPluginKeys = {"name", "path", "required", "config"};

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
    throw ConfigError(fmt::format("{}: line {}: invalid JSON: {}", origin, line, what));
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

const std::vector<std::string>& configKeys() {
  static const std::vector<std::string> keys(kKeys.begin(), kKeys.end());
  return keys;
}

void loadConfigJson(const std::string& text, const std::string& origin, AgentConfig& config) {
  json root = parseJson(text, origin);
  try {
    JsonReader r(root, "");
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
    if (const json* plugins = r.find("plugins")) {
      if (!plugins->is_array()) r.fail("plugins", "expected an array of plugin entries");
      std::vector<PluginEntry> entries;
      for (std::size_t i = 0; i < plugins->size(); ++i) {
        JsonReader p((*plugins)[i], "/plugins/" + std::to_string(i));
        p.rejectUnknown(kPluginKeys);
        PluginEntry entry;
        entry.name = p.optionalString("name");
        entry.path = p.optionalString("path");
        if (entry.name.empty() && entry.path.empty()) {
          throw JsonPathError(p.path(), "a plugin entry needs a name or a path");
        }
        entry.required = p.optionalBool("required", true);
        if (const json* c = p.find("config")) {
          if (!c->is_object()) p.fail("config", "expected an object");
          entry.config = *c;
        }
        entries.push_back(std::move(entry));
      }
      config.plugins = std::move(entries);
    }
  } catch (const JsonPathError& e) {
    throw ConfigError(fmt::format("{}: {}: {}", origin, e.path(), e.detail()));
  }
}

void loadConfigFile(const std::string& path, AgentConfig& config) {
  loadConfigJson(readFile(path), path, config);
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
  json root = parseJson(readFile(path), path);
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
    throw ConfigError(fmt::format("{}: {}: {}", path, e.path(), e.detail()));
  }
  return out;
}

}  // namespace dockhand::agent
