// AgentCommand: the command line of a `dockhand` agent under test, and the agent's exit codes
// by name.
//
// A test fills in what it cares about (the driver's URL, the executor id, the work directory,
// a config file) and hands argv() to a ChildProcess; the rest has the defaults every test
// used. What the ChildProcess's waitExit() returns compares with toInt(ExitCode::k...): the
// codes are the agent's own (agent/core/exit_codes.h), never numbers copied into a test.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "core/exit_codes.h"

namespace dockhand::testing {

using agent::ExitCode;
using agent::toInt;

// Every member has an initializer: GCC warns about a member left out of a designated
// initializer unless it has one.
struct AgentCommand {
  std::filesystem::path config{};  // --config, when set
  std::string driver_url{};        // ws://127.0.0.1:PORT/ (or wss://)
  std::string executor_id = "a1";
  std::string app_id = "test-app";
  int cores = 2;
  std::string hostname = "127.0.0.1";
  std::filesystem::path work_dir{};  // required: each test keeps its agents' files in its TempDir
  std::vector<std::string> extra{};  // further options, appended as given

  // agentBinary() and the options above.
  std::vector<std::string> argv() const;
};

}  // namespace dockhand::testing
