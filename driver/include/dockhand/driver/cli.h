// The dockhand-driver command line: `run` (a job on local agents), `serve`, and
// `decommission` (a client of a running driver's control API). runCli parses the options
// (cli_options.h) and hands them to one command; each command runs in the calling thread
// and starts what else it needs (DriverService, LocalAgents, a SignalWatcher).
#pragma once

namespace dockhand::driver {

struct CliOptions;

// Exit codes of dockhand-driver.
enum class DriverExit : int {
  kSuccess = 0,        // the job succeeded (serve: stopped by a signal)
  kJobFailed = 1,      // the job failed, timed out, or could not run
  kConfigError = 2,    // a config or job file is invalid, or the agent program is missing
  kUsage = 64,         // unknown option or bad option value (EX_USAGE)
  kInterrupted = 130,  // run: stopped by SIGINT/SIGTERM before the job ended
};

// Runs the program. Call first thing in main(): it blocks SIGINT/SIGTERM in the calling
// thread before any other thread exists, so that they are handled in one place.
int runCli(int argc, char** argv);

// The commands, each returning the exit code (a DriverExit). They throw ConfigError for a
// bad config or job file and std::exception for anything else that stops them; runCli maps
// those to exit codes 2 and 1.
int runCommand(const CliOptions& options);           // cli_run.cpp
int serveCommand(const CliOptions& options);         // cli_serve.cpp
int decommissionCommand(const CliOptions& options);  // cli_decommission.cpp
int fetchCommand(const CliOptions& options);         // cli_fetch.cpp
int reportCommand(const CliOptions& options);        // cli_report.cpp

}  // namespace dockhand::driver
