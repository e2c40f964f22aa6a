// PluginResult: the answer of one call into a plugin, as the plugin host hands it on.
#pragma once

#include <string>

#include "dockhand/plugin.h"

namespace dockhand::agent {

// Its status, and either the plugin's out_json (on DH_OK) or the error: the plugin's
// last_error() message, or why the host did not get an answer (a call that never returned).
struct PluginResult {
  dh_status status = DH_OK;
  std::string json;   // out_json, copied, for hooks that return one
  std::string error;  // last_error(), copied, when status != DH_OK
  bool ok() const { return status == DH_OK; }
};

}  // namespace dockhand::agent
