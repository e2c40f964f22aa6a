// AgentConfig: everything the `dockhand` program is configured with, and how it is read.
//
// Sources, later ones winning: built-in defaults, the JSON file given with --config, the
// environment (DOCKHAND_LOG_URL_*, DOCKHAND_EXECUTOR_ATTRIBUTE_* and their SPARK_ twins), and
// the command line. Reading is strict: an unknown key or a value of the wrong type is an
// error that names the file and the JSON path, and the agent exits 2 before connecting.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "dockhand/protocol/messages.h"

namespace dockhand::agent {

// A config problem: where (file and JSON path, or the option) and what.
class ConfigError : public std::runtime_error {
 public:
  explicit ConfigError(const std::string& what) : std::runtime_error(what) {}
};

struct PluginEntry {
  std::string name;  // a plugin name searched in plugin_dirs ("process"), or empty with path
  std::string path;  // an explicit .so path
  bool required = true;
  nlohmann::json config = nlohmann::json::object();
};

struct AgentConfig {
  // The seed's options.
  std::string driver_url;
  std::string executor_id;
  std::string bind_address;  // default: hostname
  std::string hostname;      // default: this machine's name
  int cores = 0;             // required, > 0
  std::string resources_file;
  std::string app_id;
  std::string worker_url;
  int resource_profile_id = 0;

  // Dockhand's own settings.
  std::string work_dir;  // default: $TMPDIR/dockhand/<app_id>/<executor_id>
  std::string log_level = "info";
  std::vector<std::string> plugin_dirs;  // searched before the default directories
  std::vector<PluginEntry> plugins = {PluginEntry{"process", "", true, nlohmann::json::object()}};
  int connect_tries = 3;
  std::int64_t connect_retry_delay_ms = 1000;
  std::int64_t ask_timeout_ms = 30000;
  std::int64_t stop_grace_ms = 5000;
  std::int64_t max_frame_bytes = 16 * 1024 * 1024;

  // Filled from the environment, not from the file.
  std::map<std::string, std::string> log_urls;
  std::map<std::string, std::string> attributes;
};

// The keys a config file may hold (for messages and docs).
const std::vector<std::string>& configKeys();

// Reads a JSON config file over `config`. Throws ConfigError "FILE: /json/path: what".
void loadConfigFile(const std::string& path, AgentConfig& config);
// The same from JSON text; `origin` names the source in messages.
void loadConfigJson(const std::string& text, const std::string& origin, AgentConfig& config);

// Applies one command-line option (name without dashes, e.g. "cores"). Throws ConfigError
// "--cores: expected a positive integer, got 'x'".
void applyOption(const std::string& name, const std::string& value, AgentConfig& config);

// Log URLs and attributes from an environment (entries "KEY=VALUE"): DOCKHAND_LOG_URL_X=u ->
// log_urls["x"]=u; DOCKHAND_EXECUTOR_ATTRIBUTE_X=v -> attributes["X"]=v. SPARK_ prefixes are
// accepted too; the DOCKHAND_ one wins when both name the same key.
void applyEnvironment(const std::vector<std::string>& environment, AgentConfig& config);

// Fills defaults that depend on other values (hostname, bind address, work dir).
void applyDefaults(AgentConfig& config);

// The required options that are missing ("--driver-url", ...), empty when complete.
std::vector<std::string> missingRequired(const AgentConfig& config);

// Reads a Spark-format resources file: a JSON array of
// {"id": {"componentName": "spark.executor", "resourceName": "gpu"}, "addresses": ["0"]}.
// Throws ConfigError naming the file and JSON path.
std::map<std::string, protocol::ResourceInfo> loadResourcesFile(const std::string& path);

}  // namespace dockhand::agent
