// The dockhand-driver command line: `run` (a job on local agents), `serve`, and
// `decommission` (a client of a running driver's control API).
#pragma once

namespace dockhand::driver {

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

}  // namespace dockhand::driver
