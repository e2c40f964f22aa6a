// Exports the `process` task runner.
#include "dockhand/plugin.hpp"
#include "process_runner.h"

DOCKHAND_PLUGIN(dockhand::plugins::process::ProcessRunner, "process", "0.1.0",
                "Runs a task's command in its own process group")
