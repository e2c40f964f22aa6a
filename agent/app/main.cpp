// The `dockhand` program: the node agent, and its subcommands.
//
//   dockhand [options]          run the agent (AgentApplication)
//   dockhand config ...         validate or show the configuration (config_command.h)
//   dockhand plugins ...        list the configured plugins, inspect one (plugins_command.h)
//   dockhand discover ...       run resource discovery and show it (discover_command.h)
//   dockhand jobs ...           inspect a job library, run one task function (jobs_command.h)
//
// A subcommand is argv[1]; each has its own run function and file. Add one here by name.
#include <iostream>
#include <string>
#include <string_view>
#include <vector>

#include "app/agent_application.h"
#include "app/config_command.h"
#include "app/discover_command.h"
#include "app/jobs_command.h"
#include "app/plugins_command.h"

int main(int argc, char** argv) {
  std::string_view command = argc > 1 ? argv[1] : "";
  std::vector<std::string> args(argv + (argc > 1 ? 2 : argc), argv + argc);
  if (command == "config") return dockhand::agent::runConfigCommand(args, std::cout, std::cerr);
  if (command == "plugins") return dockhand::agent::runPluginsCommand(args, std::cout, std::cerr);
  if (command == "discover") return dockhand::agent::runDiscoverCommand(args, std::cout, std::cerr);
  if (command == "jobs") return dockhand::agent::runJobsCommand(args, std::cout, std::cerr);

  dockhand::agent::AgentApplication app;
  return app.start(argc, argv);
}
