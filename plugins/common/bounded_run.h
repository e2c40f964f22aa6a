// runBounded: runs a helper program to its end or to a deadline and captures what it prints,
// for the discovery plugins that call one (script: a discovery script; nvidia: nvidia-smi).
//
// The program starts with posix_spawn in a process group of its own, stdin from /dev/null,
// no signal blocked, the agent's environment; stdout and stderr come back through pipes.
// Past the deadline the whole group gets SIGKILL; the program is always reaped before
// runBounded returns. It blocks the calling thread meanwhile and keeps no state: any thread,
// any number at once.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

namespace dockhand::plugins {

struct BoundedRun {
  bool timed_out = false;
  int exit_code = -1;  // when it exited
  int signal = 0;      // when a signal ended it
  std::string out;     // its first kBoundedRunCaptureBytes bytes of stdout
  std::string err;     // and of stderr
};

inline constexpr std::size_t kBoundedRunCaptureBytes = std::size_t{1} << 20;

// args[0] is the program's path (no PATH search); the rest are its arguments. Throws
// std::runtime_error when it cannot be started: "cannot start '<args[0]>': <why>", or
// "pipe: <why>".
BoundedRun runBounded(const std::vector<std::string>& args, std::chrono::milliseconds timeout);

}  // namespace dockhand::plugins
