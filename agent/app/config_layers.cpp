// Layering: the defaults, then each config file with its fragments, then the environment, then
// the command line, each over the one before; then the whole-config rules (config_check.cpp).
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdlib>

#include <fmt/format.h>

#include "app/agent_config.h"

namespace dockhand::agent {

namespace {

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

const std::vector<EnvironmentOverride>& environmentOverrides() {
  static const std::vector<EnvironmentOverride> kOverrides = {
      {"DOCKHAND_DRIVER_URL", "driver-url"}, {"DOCKHAND_EXECUTOR_ID", "executor-id"},
      {"DOCKHAND_APP_ID", "app-id"},         {"DOCKHAND_CORES", "cores"},
      {"DOCKHAND_WORK_DIR", "work-dir"},     {"DOCKHAND_LOG_LEVEL", "log-level"},
      {"DOCKHAND_LOG_FORMAT", "log-format"}, {"DOCKHAND_AUTH_SECRET_FILE", "auth-secret-file"},
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
  } else if (name == "log-format") {
    config.log_format = value;
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

}  // namespace dockhand::agent
