// `dockhand plugins check`: every plugin an agent would load, made as the agent makes it, and
// each hook of its kind called once against scratch state, so that a plugin an operator
// installs (or an author writes) fails here, in the agent's words, and not on a busy node.
//
// For each plugin `dockhand plugins list` shows (decommission.migration's instances included):
//   loading             the library found, its file checked, its config checked against its
//                       schema and create() called with it: the agent's own path and words.
//   resource_discovery  discover() of each resource asked for (--resource; by default the
//                       config's resources, else "gpu"): an answer or "declined" passes, an
//                       error or malformed answer fails; describe() too when it has one.
//   task_runner         launch() of one task in a scratch directory (payload --payload
//                       [RUNNER=]JSON, by default {"shell": "sleep 30"}), then kill();
//                       passes when the runner reports the task ended (KILLED, or the state
//                       it reached first) within plugin_call_timeout_ms.
//   block_migration     migrate() of one scratch block (64 KiB) with one scratch peer (an
//                       agent block server on 127.0.0.1, or on bind_address with the agent's
//                       TLS); passes when the answer has the block migrated and the bytes at
//                       the place it names (the peer, or the fallback store: fallback_dir)
//                       have its checksum. The copy is removed again.
// Nothing is left behind: the scratch directory goes, and so does a block a plugin put in the
// fallback store.
#pragma once

#include <iosfwd>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "app/agent_config.h"
#include "app/plugin_loader.h"

namespace dockhand::agent {

struct PluginCheckOptions {
  std::vector<std::string> resources;  // empty: the config's resources, else "gpu"
  // The launched task's payload by runner name ("" for any runner); by default
  // {"shell": "sleep 30"}, the process runner's.
  std::map<std::string, nlohmann::json> payloads;
  bool as_json = false;
};

// Checks every plugin of `config` (`specs`: pluginSpecs(config)) and prints a line (or, with
// as_json, one JSON document) per plugin. 0 when every one passed; ExitCode::kPluginError
// when one failed to load or a hook failed.
int checkPlugins(const AgentConfig& config, const std::vector<PluginSpec>& specs,
                 const PluginCheckOptions& options, std::ostream& out);

}  // namespace dockhand::agent
