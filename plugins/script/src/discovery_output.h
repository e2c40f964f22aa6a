// What a Spark discovery script prints, read: one JSON object {"name": ..., "addresses":
// [...]} on stdout (extra fields ignored, a missing or null list meaning none). Apart from the
// plugin so that tests and the fuzz target read exactly what the plugin reads.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

namespace dockhand::plugins::script {

// The output is not a valid answer for the resource. what() continues "discovery script X"
// ("printed no JSON object ...", "reported resource 'fpga', not 'gpu'").
class DiscoveryOutputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The first 2000 bytes of `text` without trailing blanks and newlines, "(nothing)" when empty.
std::string excerpt(const std::string& text);

// The addresses a script for resource `name` reported in `out` (its stdout), in order. An
// empty address is refused. Throws DiscoveryOutputError.
std::vector<std::string> parseDiscoveryOutput(const std::string& out, const std::string& name);

}  // namespace dockhand::plugins::script
