// errnoText: the text of an errno value, as every message of the process runner words it.
// Header-only; no state.
#pragma once

#include <string>
#include <system_error>

namespace dockhand::plugins::process {

inline std::string errnoText(int error) { return std::generic_category().message(error); }

}  // namespace dockhand::plugins::process
