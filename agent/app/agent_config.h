// AgentConfig: everything the `dockhand` program is configured with, and how it is read.
//
// Sources, later ones winning: built-in defaults, the JSON file given with --config, the
// environment (DOCKHAND_LOG_URL_*, DOCKHAND_EXECUTOR_ATTRIBUTE_* and their SPARK_ twins), and
// the command line. Reading is strict: an unknown key or a value of the wrong type is an
// error that names the file and the JSON path, and the agent exits 2 before connecting.
//
// One header, four files: agent_config.cpp reads one source (a file, its fragments);
// config_layers.cpp layers the sources (loadConfig, the environment, options, defaults);
// config_check.cpp holds the whole-config rules; config_output.cpp writes the effective config.
// The Spark resources file is agent/resources/resources_file.h.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "dockhand/base/config_error.h"
#include "dockhand/protocol/messages.h"
#include "dockhand/tls/tls.h"
#include "plugins/plugin_trust.h"

namespace dockhand::agent {

// Problems are ConfigErrors (dockhand/base/config_error.h), every one found, not only the first,
// each with its origin (a file path, "env:VAR" or "--option") and JSON pointer.
struct PluginEntry {
  std::string name;  // a plugin name searched in plugin_dirs ("process"), or empty with path
  std::string path;  // an explicit .so path
  bool required = true;
  nlohmann::json config = nlohmann::json::object();
};

// One entry of "decommission.migration": a plugin name ("peer"), or {"name", "config"} to give
// the plugin a config of its own (docs/blocks.md, "Migration plugins").
struct MigrationEntry {
  std::string name;
  nlohmann::json config = nullptr;  // null: none given here
};

// "decommission": {...}: how the agent leaves (docs/blocks.md).
struct DecommissionConfig {
  bool enabled = true;
  std::string signal = "SIGPWR";  // the signal that starts a decommission
  std::vector<MigrationEntry> migration = {MigrationEntry{"peer"}};  // tried in order
  bool shuffle_blocks = true;  // which kinds of blocks migrate
  bool rdd_blocks = true;
  bool task_blocks = true;
  std::int64_t deadline_ms = 0;  // 0: wait for tasks and migration as long as it takes
  std::int64_t check_interval_ms = 1000;
  int max_concurrent = 4;                  // blocks moved at once
  std::int64_t bandwidth_bytes_per_s = 0;  // 0: unlimited
  int max_failures_per_block = 3;          // per pass, before a block is left to the next plugin
};

// The number of a decommission signal name ("SIGPWR", "PWR", "SIGUSR2", ...), or 0 when the
// name is unknown or names a signal the agent uses otherwise (TERM, INT, HUP, KILL, STOP, ...).
int decommissionSignalNumber(const std::string& name);

// The default plugin_trust: policy "any"; the package's catalog of its own plugins, then
// /etc/dockhand/plugins.sha256; keys in /etc/dockhand/trusted-keys.
PluginTrust defaultPluginTrust();

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
  std::string log_format = "text";       // "text" or "json" (docs/operations.md, "Structured logs")
  std::vector<std::string> plugin_dirs;  // searched before the default directories
  std::vector<PluginEntry> plugins = {PluginEntry{"process", "", true, nlohmann::json::object()}};
  // Drop-in plugin manifests (*.json, one plugin entry each), loaded after `plugins` in name
  // order. A missing directory holds no manifests.
  std::string plugin_manifest_dir = "/etc/dockhand/plugins.d";
  bool allow_insecure_plugins = false;  // load plugins writable by group/others (development)
  // Which plugin files may load (plugins/plugin_trust.h, docs/plugins.md "Trust"): any file
  // by default; under "verified" only one pinned in a catalog or signed by a trusted key.
  PluginTrust plugin_trust = defaultPluginTrust();
  // Run the discovery scripts an application's resource profile names (the `script` plugin as
  // the discovery chain's last step, docs/resources.md). False: a profile's script never runs.
  bool allow_profile_discovery_scripts = true;
  std::int64_t plugin_call_warn_ms = 100;  // warn when a plugin call takes longer
  // The longest a plugin call may take before the agent gives up on it (discovery, resource
  // allocation, task runner calls; what follows for each: docs/plugins.md).
  std::int64_t plugin_call_timeout_ms = 60000;
  // Ended tasks whose directories (stdout, stderr, what the task left) are kept, the most
  // recent ones; older directories are removed.
  std::int64_t keep_task_dirs = 100;
  // Resources this agent offers, by name, besides (and over) the app's resource profile.
  std::map<std::string, protocol::ExecutorResourceRequest> resources;
  int connect_tries = 3;
  std::int64_t connect_retry_delay_ms = 1000;
  // How long a registered agent whose connection dropped tries to get it back, its tasks and
  // blocks kept, before it exits 5 (protocol.md 6.6); 0: it exits at once.
  std::int64_t reconnect_timeout_ms = 60000;
  std::int64_t ask_timeout_ms = 30000;
  std::int64_t stop_grace_ms = 5000;
  // How long a restart in place waits for running tasks that cannot outlive the program
  // (library tasks on threads) to end before it stops them; 0: at once (the driver reruns them).
  std::int64_t restart_wait_ms = 0;
  std::int64_t max_frame_bytes = std::int64_t{16} * 1024 * 1024;

  // Blocks and decommission.
  int block_port = 0;        // the block server's TCP port on bind_address (0: ephemeral)
  std::string fallback_dir;  // the fallback block store; served by GET when set
  DecommissionConfig decommission;

  // Authentication (docs/security.md): the file holding the cluster secret, readable by its
  // owner only. Empty: this agent does not authenticate (and a driver that requires it
  // refuses it). The secret itself is never a config value.
  std::string auth_secret_file;

  // TLS (docs/security.md): on, the driver link is wss:// and the block server (with every
  // client of it: input fetches, the peer plugin) https://. Off: plain ws:// and http://.
  tls::TlsConfig tls;

  // Filled from the environment, not from the file.
  std::map<std::string, std::string> log_urls;
  std::map<std::string, std::string> attributes;
};

// The keys a config file may hold (for messages and docs).
const std::vector<std::string>& configKeys();

// Where each value of a config came from, by JSON pointer: "/cores" -> "file:/etc/dockhand/
// agent.json", "env:DOCKHAND_CORES" or "cli". A value with no entry (and no entry for a
// pointer above it) is a default.
using ConfigOrigins = std::map<std::string, std::string>;

// Reads a JSON config file over `config`: the keys it holds replace the values read before
// (objects merge key by key, arrays are replaced whole). Throws ConfigError with EVERY problem
// of the file, each "FILE: /json/path: what". Records in `origins` what the file set.
void loadConfigFile(const std::string& path, AgentConfig& config, ConfigOrigins* origins = nullptr);
// The same from JSON text; `origin` names the source in messages.
void loadConfigJson(const std::string& text, const std::string& origin, AgentConfig& config,
                    ConfigOrigins* origins = nullptr);

// The files read for `--config FILE`: FILE, then the *.json files of its fragment directory
// (FILE without ".json", plus ".d": agent.json -> agent.d/, agent-a.json -> agent-a.d/) in
// name order. A missing fragment directory is fine; FILE itself must exist.
std::vector<std::string> configFilesFor(const std::string& file);

// Every source of one agent's config, in the order they apply.
struct ConfigSources {
  std::vector<std::string> files;                            // --config FILEs, in order
  std::vector<std::string> environment;                      // "KEY=VALUE" entries
  std::vector<std::pair<std::string, std::string>> options;  // command line (name, value)
};

// Reads defaults, then each file with its fragments, then the environment overrides, then the
// options, then checks the whole (checkConfig). Throws ConfigError with every problem found.
void loadConfig(const ConfigSources& sources, AgentConfig& config,
                ConfigOrigins* origins = nullptr);

// The rules about the whole config rather than one file: required keys, driver_url's form,
// log_level. Each problem names the source of the value at fault.
std::vector<ConfigProblem> checkConfig(const AgentConfig& config, const ConfigOrigins& origins);

// The config as a config file would hold it (every key of configKeys()).
nlohmann::json configToJson(const AgentConfig& config);
// `value` with every member whose key contains "secret", "token" or "password" (any case,
// at any depth) replaced by "<redacted>".
nlohmann::json redactSecrets(nlohmann::json value);

// The environment variables that override config keys: DOCKHAND_DRIVER_URL -> driver-url, ...
struct EnvironmentOverride {
  const char* variable;
  const char* option;  // the command-line option (applyOption's name)
};
const std::vector<EnvironmentOverride>& environmentOverrides();
// Applies the overrides present in `environment` ("KEY=VALUE"). Throws ConfigError with every
// bad value, each "env:DOCKHAND_CORES: what".
void applyEnvironmentOverrides(const std::vector<std::string>& environment, AgentConfig& config,
                               ConfigOrigins* origins = nullptr);
// The config key ("cores", "plugin_dirs") set by a command-line option ("cores", "plugin-dir").
std::string optionKey(const std::string& option);

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

}  // namespace dockhand::agent
