// Exports the `library` task runner.
#include "dockhand/plugin.hpp"
#include "library_runner.h"

DOCKHAND_PLUGIN(dockhand::plugins::library::LibraryRunner, "library", "0.1.0",
                "Runs task functions of job libraries on threads of the agent")
