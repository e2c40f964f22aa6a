// `dockhand plugins ...`: what plugins an agent would run with, and what a plugin file is.
//
//   dockhand plugins list [--config FILE]... [--json]
//       Resolves the plugins the config (and the drop-in manifests) ask for, loads and
//       creates each one exactly as the agent would (then destroys it again), and prints
//       for each: its name, version, ABI, kinds, the file it came from, where it was asked
//       for, and, for one that failed, why. decommission.migration's instances are listed
//       too, made with the config the agent composes for them. Exits 0, or 8 when a required
//       plugin failed.
//   dockhand plugins check [--config FILE]... [--json] [--resource NAME]...
//                          [--payload [RUNNER=]JSON]...
//       As list, then each hook of each plugin's kind called once (app/plugins_check.h).
//       Exits 0 when every plugin passed, 8 otherwise.
//   dockhand plugins sign --key PRIVATE_KEY FILE
//       Writes FILE.sig: the base64 Ed25519 signature of FILE's bytes by the PEM private key
//       (for plugin_trust "verified", plugins/plugin_trust.h).
//   dockhand plugins trust FILE [--catalog CATALOG]
//       Pins FILE's SHA-256 in CATALOG (default /etc/dockhand/plugins.sha256).
//   dockhand plugins inspect FILE [--json] [--allow-insecure]
//       Loads one plugin file and prints its descriptor: name, version, description, ABI,
//       kinds, the hooks it implements and its config schema. Never calls create().
//       Exits 0, or 8 when the file is refused (the reason is printed).
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

namespace dockhand::agent {

// Runs `dockhand plugins ARGS...` (args excludes "dockhand" and "plugins").
int runPluginsCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace dockhand::agent
