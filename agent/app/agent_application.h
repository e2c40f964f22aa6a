// AgentApplication: the `dockhand` program. Parses the command line, reads the config, sets up
// logging and the signal mask, builds the Agent (agent.h: the parts, wired) and returns its exit
// code from main(). Not on the path of any task or status.
//
// The command line is parsed here, not by a library: `--name=VALUE` or `--name VALUE`, `-h`,
// `--` ending the options. Names match exactly (no abbreviations, case counts), a value-less
// option given a value, an option without its value, an unknown option and a second use of an
// option that is not repeatable are each a usage error (exit 64) that names the option.
#pragma once

#include <iosfwd>
#include <string>
#include <utility>
#include <vector>

#include "app/agent_config.h"

namespace dockhand::agent {

// One option of the command line, as --help lists it.
struct CommandOption {
  std::string name;         // without the leading "--"
  std::string short_name;   // one letter without the "-", or empty
  std::string argument;     // the value's name in --help ("FILE"); empty: a flag
  bool repeatable = false;  // may be given more than once (each use is kept, in order)
  std::string description;
};

// The options of `dockhand`, in --help's order.
const std::vector<CommandOption>& agentCommandOptions();

// The command line taken apart: each option given with its value, in order, and the arguments
// that are not options. Throws std::invalid_argument with the message for the user.
struct ParsedCommandLine {
  std::vector<std::pair<std::string, std::string>> options;  // (name, value); flags: ""
  std::vector<std::string> arguments;
};
ParsedCommandLine parseCommandLine(const std::vector<CommandOption>& table,
                                   const std::vector<std::string>& args);

class AgentApplication final {
 public:
  // Parses the command line and runs; returns the process exit code (see exit_codes.h).
  int start(int argc, char** argv);

  // Prints the usage (options and exit codes) to `out`.
  static void printUsage(std::ostream& out);

 private:
  int run(const std::vector<std::string>& arguments);
  int runAgent(AgentConfig config);

  bool help_ = false;
  bool version_ = false;
  std::vector<std::string> config_files_;                       // --config, repeatable, in order
  std::vector<std::pair<std::string, std::string>> overrides_;  // in command-line order
  // For a restart in place (SIGUSR2): the program as it was started (its path resolved when
  // it started, so that a package upgrade's new file at that path is what runs next) and its
  // arguments.
  std::string program_;
  std::vector<std::string> argv_;
};

}  // namespace dockhand::agent
