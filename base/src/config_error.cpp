#include "dockhand/base/config_error.h"

#include <utility>

namespace dockhand {
namespace {

std::string joinProblems(const std::vector<ConfigProblem>& problems) {
  std::string out;
  for (const auto& p : problems) out += (out.empty() ? "" : "\n") + p.text();
  return out;
}

}  // namespace

std::string ConfigProblem::text() const {
  std::string out = origin;
  if (!path.empty()) out += (out.empty() ? "" : ": ") + path;
  if (!message.empty()) out += (out.empty() ? "" : ": ") + message;
  return out;
}

ConfigError::ConfigError(const std::string& what)
    : std::runtime_error(what), problems_{ConfigProblem{"", "", what}} {}

ConfigError::ConfigError(std::vector<ConfigProblem> problems)
    : std::runtime_error(joinProblems(problems)), problems_(std::move(problems)) {}

}  // namespace dockhand
