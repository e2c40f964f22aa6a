// The Spark-format resources file (`--resourcesFile`, `resources_file`): the addresses of each
// resource the launcher already assigned to this executor, read once at start-up and given to
// the discovery chain as found (agent/resources/resource_discovery.h). Stateless: any thread.
#pragma once

#include <map>
#include <string>

#include "dockhand/base/config_error.h"
#include "dockhand/protocol/messages.h"

namespace dockhand::agent {

// Reads a Spark-format resources file: a JSON array of
// {"id": {"componentName": "spark.executor", "resourceName": "gpu"}, "addresses": ["0"]}.
// Throws ConfigError naming the file and JSON path.
std::map<std::string, protocol::ResourceInfo> loadResourcesFile(const std::string& path);
// The same from JSON text; `origin` names the source in messages.
std::map<std::string, protocol::ResourceInfo> parseResourcesJson(const std::string& text,
                                                                 const std::string& origin);

}  // namespace dockhand::agent
