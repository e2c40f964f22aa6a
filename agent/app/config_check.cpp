// The rules about the whole config rather than one file (checkConfig): required keys,
// driver_url's form against the tls section, the tls files, log_level. Each problem names the
// source of the value at fault, from the origins the layering recorded.
#include <Poco/Exception.h>
#include <Poco/URI.h>
#include <fmt/format.h>

#include "app/agent_config.h"
#include "app/log_setup.h"

namespace dockhand::agent {

namespace {

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

}  // namespace

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
  if (!parseLogFormat(config.log_format)) {
    problem("log_format", fmt::format("unknown format '{}' (text or json)", config.log_format));
  }
  return problems;
}

}  // namespace dockhand::agent
