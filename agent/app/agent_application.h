// AgentApplication: the `dockhand` program. Parses the command line (Poco options), reads the
// config, sets up logging and the signal mask, builds the Agent (agent.h: the parts, wired)
// and returns its exit code from main(). Not on the path of any task or status.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <Poco/Util/OptionSet.h>
#include <Poco/Util/ServerApplication.h>

#include "app/agent_config.h"

namespace dockhand::agent {

class AgentApplication final : public Poco::Util::ServerApplication {
 public:
  AgentApplication();

  // Parses the command line and runs; returns the process exit code (see exit_codes.h).
  int start(int argc, char** argv);

  // Prints the usage (options and exit codes) to `out`.
  void printUsage(std::ostream& out) const;

 protected:
  void defineOptions(Poco::Util::OptionSet& options) override;
  void handleOption(const std::string& name, const std::string& value) override;
  int main(const std::vector<std::string>& args) override;

 private:
  int runAgent(AgentConfig config);

  bool help_ = false;
  bool version_ = false;
  std::vector<std::string> config_files_;                       // --config, repeatable, in order
  std::vector<std::pair<std::string, std::string>> overrides_;  // in command-line order
};

}  // namespace dockhand::agent
