// Runs a discovery script the way Spark does: no arguments, stdout and stderr captured apart;
// a file without a "#!" line runs under /bin/sh (as Java's ProcessBuilder does through the
// kernel's ENOEXEC fallback). Unlike Spark, a deadline bounds it: past it, the script's whole
// process group is killed (plugins/common/bounded_run.h). Blocks the calling thread.
#pragma once

#include <chrono>
#include <string>

#include "bounded_run.h"

namespace dockhand::plugins::script {

// Throws std::runtime_error when the script cannot be started at all.
BoundedRun runScript(const std::string& path, std::chrono::milliseconds timeout);

}  // namespace dockhand::plugins::script
