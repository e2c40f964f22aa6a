// `dockhand config ...`: the operator's view of the agent's configuration.
//
//   dockhand config validate [FILE]... [--no-env]
//       Reads FILE (default: the installed agent.json) with its fragments, the DOCKHAND_*
//       overrides (unless --no-env) and checks the whole with the agent's own rules. Prints
//       every problem, one a line, each with its file and JSON path; exits 0 (valid) or 2.
//   dockhand config show [--config FILE]... [--json] [--no-env] [--OPTION VALUE]...
//       Prints the effective config (defaults, files, environment, options, in that order)
//       with secrets redacted, and where each value came from.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

namespace dockhand::agent {

// Runs `dockhand config ARGS...` (args excludes "dockhand" and "config"); returns the exit code.
int runConfigCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace dockhand::agent
