// The errors of the plugin host.
#pragma once

#include <stdexcept>
#include <string>

namespace dockhand::agent {

// A plugin could not be found, loaded, checked or created. what() is one line that names the
// plugin's file (and name, once known) and the reason.
class PluginLoadError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace dockhand::agent
