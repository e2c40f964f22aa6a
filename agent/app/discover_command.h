// `dockhand discover [--config FILE]... [--resourcesFile FILE] [--json]`: runs the resource
// discovery chain exactly as the agent does at start-up (the config's `resources` requests,
// the resources file's allocations, the discovery plugins in configured order), without
// connecting to a driver, and prints each resource's addresses and which plugin found them,
// then what each discovery plugin describes (GPU names, host cores and memory, ...).
// Exits 0; 9 when a resource cannot be satisfied; 8 when a required plugin fails; 2 for a
// config error.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

namespace dockhand::agent {

int runDiscoverCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace dockhand::agent
