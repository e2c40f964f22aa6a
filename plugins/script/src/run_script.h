// Runs a discovery script the way Spark does: no arguments, stdout and stderr captured apart;
// a file without a "#!" line runs under /bin/sh (as Java's ProcessBuilder does through the
// kernel's ENOEXEC fallback). Unlike Spark, a deadline bounds it: past it, the script's whole
// process group is killed.
#pragma once

#include <chrono>
#include <string>

namespace dockhand::plugins::script {

struct ScriptRun {
  bool timed_out = false;
  int exit_code = -1;  // when it exited
  int signal = 0;      // when a signal ended it
  std::string out;
  std::string err;
};

// Throws std::runtime_error when the script cannot be started at all.
ScriptRun runScript(const std::string& path, std::chrono::milliseconds timeout);

}  // namespace dockhand::plugins::script
