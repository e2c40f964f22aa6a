#include "dockhand/driver/driver_config.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "dockhand/protocol/json_reader.h"

namespace dockhand::driver {

using protocol::JsonPathError;
using protocol::JsonReader;

void loadTlsContexts(DriverConfig& config) {
  if (!config.tls.enabled) return;
  try {
    config.tls_server = tls::makeContext(config.tls, tls::Role::kServer);
    config.tls_client = tls::makeContext(config.tls, tls::Role::kClient);
  } catch (const tls::TlsError& e) {
    throw ConfigError(e.what());
  }
}

Json readJsonFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError(fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw ConfigError(fmt::format("{}: cannot read", path));
  try {
    return Json::parse(text.str());
  } catch (const Json::parse_error& e) {
    // nlohmann's message carries the byte offset ("at line 3, column 7").
    throw ConfigError(fmt::format("{}: not valid JSON: {}", path, e.what()));
  }
}

DriverConfig parseDriverConfig(const Json& root, const std::string& source) {
  try {
    JsonReader r(root, "");
    r.rejectUnknown({"properties", "log_level", "resource_profile", "agent_timeout_ms",
                     "agent_reconnect_grace_ms", "heartbeat_interval_ms", "max_attempts",
                     "launch_ahead", "max_frame_bytes", "server_threads", "hello_timeout_ms",
                     "max_queued_frames", "result_fetch_timeout_ms", "max_result_bytes",
                     "auth_secret_file", "tls"});
    DriverConfig c;
    c.properties = r.optionalStringMap("properties");
    if (r.has("log_level")) {
      std::string level = r.requiredString("log_level");
      static const std::set<std::string, std::less<>> kLevels = {
          "trace", "debug", "info", "warn", "warning", "error", "critical", "off"};
      if (kLevels.count(level) == 0) {
        r.fail("log_level", fmt::format("unknown level '{}' (expected trace, debug, info, warn, "
                                        "error, critical or off)",
                                        level));
      }
      c.log_level = level;
    }
    if (const Json* profile = r.find("resource_profile")) {
      try {
        c.resource_profile =
            protocol::fromJson(*profile, protocol::Tag<protocol::ResourceProfile>{});
      } catch (const JsonPathError& e) {
        throw JsonPathError("/resource_profile" + (e.path() == "/" ? std::string() : e.path()),
                            e.detail());
      }
    }
    c.agent_timeout_ms = r.optionalInt("agent_timeout_ms", c.agent_timeout_ms, 100, 86400000);
    c.agent_reconnect_grace_ms =
        r.optionalInt("agent_reconnect_grace_ms", c.agent_reconnect_grace_ms, 0, 86400000);
    c.heartbeat_interval_ms =
        r.optionalInt("heartbeat_interval_ms", c.heartbeat_interval_ms, 10, 86400000);
    c.max_attempts = static_cast<int>(r.optionalInt("max_attempts", c.max_attempts, 1, 1000));
    const Json* ahead = r.find("launch_ahead");
    if (ahead != nullptr && ahead->is_string()) {
      if (ahead->get<std::string>() != "auto") {
        r.fail("launch_ahead", "expected \"auto\" or a number of cores from 0 to 4096");
      }
      c.launch_ahead = defaults::kLaunchAheadAuto;
    } else {
      c.launch_ahead = static_cast<int>(r.optionalInt("launch_ahead", c.launch_ahead, 0, 4096));
    }
    c.max_frame_bytes = static_cast<std::size_t>(
        r.optionalInt("max_frame_bytes", static_cast<std::int64_t>(c.max_frame_bytes), 1024,
                      std::int64_t{1} << 30));
    c.server_threads =
        static_cast<int>(r.optionalInt("server_threads", c.server_threads, 2, 65536));
    c.hello_timeout_ms = r.optionalInt("hello_timeout_ms", c.hello_timeout_ms, 100, 3600000);
    c.result_fetch_timeout_ms =
        r.optionalInt("result_fetch_timeout_ms", c.result_fetch_timeout_ms, 100, 3600000);
    c.max_result_bytes = static_cast<std::uint64_t>(
        r.optionalInt("max_result_bytes", static_cast<std::int64_t>(c.max_result_bytes), 1,
                      std::int64_t{1} << 40));
    c.max_queued_frames = static_cast<std::size_t>(
        r.optionalInt("max_queued_frames", static_cast<std::int64_t>(c.max_queued_frames), 16,
                      std::int64_t{1} << 30));
    c.auth_secret_file = r.optionalString("auth_secret_file");
    if (r.has("auth_secret_file") && c.auth_secret_file.empty()) {
      r.fail("auth_secret_file", "must name a file (leave the key out for no authentication)");
    }
    if (const Json* t = r.find("tls")) {
      std::vector<JsonPathError> problems;
      c.tls = tls::readTlsConfig(*t, "/tls", problems);
      for (const auto& [key, message] : tls::tlsConfigProblems(c.tls, /*serves=*/true)) {
        problems.emplace_back("/tls/" + key, message);
      }
      if (!problems.empty()) {
        std::vector<ConfigProblem> all;
        all.reserve(problems.size());
        for (const auto& p : problems) all.push_back(ConfigProblem{source, p.path(), p.detail()});
        throw ConfigError(std::move(all));
      }
    }
    if (c.heartbeat_interval_ms >= c.agent_timeout_ms) {
      r.fail("heartbeat_interval_ms", fmt::format("{} must be below agent_timeout_ms ({})",
                                                  c.heartbeat_interval_ms, c.agent_timeout_ms));
    }
    return c;
  } catch (const JsonPathError& e) {
    throw ConfigError({ConfigProblem{source, e.path(), e.detail()}});
  }
}

DriverConfig loadDriverConfig(const std::string& path) {
  return parseDriverConfig(readJsonFile(path), path);
}

void loadClusterSecret(DriverConfig& config) {
  if (config.auth_secret_file.empty()) return;
  try {
    config.secret = protocol::auth::loadSecretFile(config.auth_secret_file);
  } catch (const protocol::auth::SecretError& e) {
    throw ConfigError(e.what());
  }
}

}  // namespace dockhand::driver
