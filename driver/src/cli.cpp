#include "dockhand/driver/cli.h"

#include <exception>
#include <iostream>

#include "dockhand/driver/cli_options.h"
#include "dockhand/driver/cli_setup.h"
#include "dockhand/driver/driver_config.h"
#include "dockhand/driver/driver_service.h"

namespace dockhand::driver {

int runCli(int argc, char** argv) {
  SignalWatcher::blockInThisThread();
  CliOptions options;
  try {
    options = parseCliArgs(argc, argv);
  } catch (const UsageError& e) {
    std::cerr << "dockhand-driver: " << e.what() << "\n\n" << cliUsage();
    return static_cast<int>(DriverExit::kUsage);
  }
  if (options.help) {
    std::cout << cliUsage();
    return 0;
  }
  if (options.version) {
    std::cout << driverSoftware() << "\n";
    return 0;
  }
  try {
    if (options.command == "decommission") return decommissionCommand(options);
    if (options.command == "fetch") return fetchCommand(options);
    if (options.command == "report") return reportCommand(options);
    return options.command == "serve" ? serveCommand(options) : runCommand(options);
  } catch (const ConfigError& e) {
    std::cerr << "dockhand-driver: " << e.what() << "\n";
    return static_cast<int>(DriverExit::kConfigError);
  } catch (const std::exception& e) {
    std::cerr << "dockhand-driver: " << e.what() << "\n";
    return static_cast<int>(DriverExit::kJobFailed);
  }
}

}  // namespace dockhand::driver
