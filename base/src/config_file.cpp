#include "dockhand/base/config_file.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "dockhand/base/config_error.h"

namespace dockhand {

using nlohmann::json;

std::string readConfigText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError(fmt::format("{}: cannot read: {}", path, std::strerror(errno)));
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

json parseConfigJson(const std::string& text, const std::string& origin) {
  try {
    return json::parse(text);
  } catch (const json::parse_error& e) {
    // e.byte is the 1-based offset of the error; turn it into a line number.
    std::size_t line = 1;
    for (std::size_t i = 0; i + 1 < e.byte && i < text.size(); ++i) line += text[i] == '\n';
    std::string what = e.what();
    if (auto pos = what.find("parse error"); pos != std::string::npos) what = what.substr(pos);
    throw ConfigError(
        {ConfigProblem{origin, "", fmt::format("line {}: invalid JSON: {}", line, what)}});
  } catch (const json::exception& e) {
    // A number too large for a double ("1e600") is an out_of_range, not a parse_error.
    std::string what = e.what();
    if (auto pos = what.find("] "); pos != std::string::npos) what = what.substr(pos + 2);
    throw ConfigError({ConfigProblem{origin, "", "invalid JSON: " + what}});
  }
}

}  // namespace dockhand
