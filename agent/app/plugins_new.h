// `dockhand plugins new --kind discovery|runner|migration|job NAME [--dir DIR]
//                       [--templates DIR]`: a new plugin (or job library) project from the
// templates the SDK installs (sdk/templates/README.md): a CMake project that builds against the
// installed dockhand-dev package, a skeleton of the kind with a config schema, and a test.
// Writes DIR (default ./NAME), which must not exist or be empty. Exit codes: 0 written, 2 the
// templates are missing or a file cannot be written, 64 a usage error.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace dockhand::agent {

// `args` are those after "new".
int runPluginsNew(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

// "my-store" -> "MyStore": the C++ class name a template gets for a plugin name.
std::string templateClassName(const std::string& name);

}  // namespace dockhand::agent
