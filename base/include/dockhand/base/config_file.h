// Reading the text of a config file and parsing it as JSON, with the failures as ConfigErrors
// that name the file (and, for bad JSON, the line). Shared by the agent's config reader and
// its resources-file reader. Stateless: any thread.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace dockhand {

// The whole file. Throws ConfigError "PATH: cannot read: why".
std::string readConfigText(const std::string& path);

// `text` parsed as JSON; `origin` names the source in messages. Throws ConfigError with one
// problem from `origin`: "line N: invalid JSON: ..." (or "invalid JSON: ..." for a number too
// large for a double).
nlohmann::json parseConfigJson(const std::string& text, const std::string& origin);

}  // namespace dockhand
