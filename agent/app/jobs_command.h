// `dockhand jobs`: a job library (dockhand/job.h) on this machine, without a driver or an agent.
//
//   dockhand jobs inspect LIB [--json] [--allow-insecure]
//       the library's name, version, job ABI and task functions, loaded as the library runner
//       loads it (the same file checks and descriptor checks)
//   dockhand jobs run LIB FUNCTION [--args JSON] [--input ID=FILE]... [--partition N]
//                    [--work-dir DIR] [--allow-insecure]
//       calls one task function on this thread as the runner would: its inputs are the FILEs
//       (copied into the task's input/), its args the JSON; the value it returns goes to
//       stdout byte for byte, its log lines and the outputs it wrote (kept in the work dir) to
//       stderr
//
// Exit codes: 0 the library loads / the task FINISHED; 1 the task FAILED (its reason on
// stderr); 2 the library cannot be loaded, has no such function, or an input cannot be read;
// 64 a usage error. The agent's plugin_trust policy is not consulted: this runs as the user
// who runs it, on files they name.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace dockhand::agent {

int runJobsCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace dockhand::agent
