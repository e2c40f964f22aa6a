// ConfigError: the one exception for a config, option or job file that cannot be used, thrown
// by the agent's and the driver's readers and caught in one place by each program, which
// prints what() and exits with its documented config-error code (2 for both).
//
// It carries every problem found (a reader reports them all, not only the first), each with
// where it is (origin: a file path, "env:VAR" or "--option"; path: the JSON pointer of the
// value) when the reader knows them. what() holds the problems one a line, as they are
// printed. A plain value type: copy it freely, from any thread.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

namespace dockhand {

// One config problem: where it is (origin and JSON pointer, each empty when unknown or when
// the problem is about no one value) and what is wrong.
struct ConfigProblem {
  std::string origin;
  std::string path;
  std::string message;
  std::string text() const;  // "origin: /path: message", leaving out empty parts
};

class ConfigError : public std::runtime_error {
 public:
  // One problem that is all text: what() is `what`.
  explicit ConfigError(const std::string& what);
  // Every problem found; what() holds their text() one a line.
  explicit ConfigError(std::vector<ConfigProblem> problems);

  const std::vector<ConfigProblem>& problems() const { return problems_; }

 private:
  std::vector<ConfigProblem> problems_;
};

}  // namespace dockhand
