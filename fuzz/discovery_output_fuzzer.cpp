// The stdout of a Spark discovery script, as the script plugin reads it. The input is
// "<resource name>\n<stdout>". parseDiscoveryOutput must refuse only with a
// DiscoveryOutputError; what it accepts, printed again as a script would, reads back the same.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "discovery_output.h"
#include "fuzz_check.h"

using dockhand::plugins::script::DiscoveryOutputError;
using dockhand::plugins::script::parseDiscoveryOutput;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const auto newline = input.find('\n');
  if (newline == std::string_view::npos) return 0;
  const std::string name(input.substr(0, newline));
  const std::string out(input.substr(newline + 1));

  const std::string excerpt = dockhand::plugins::script::excerpt(out);
  DOCKHAND_FUZZ_CHECK(!excerpt.empty() && excerpt.size() <= 2003, excerpt);

  std::vector<std::string> addresses;
  try {
    addresses = parseDiscoveryOutput(out, name);
  } catch (const DiscoveryOutputError& e) {
    DOCKHAND_FUZZ_CHECK(std::string_view(e.what()).substr(0, 8) == "printed " ||
                            std::string_view(e.what()).substr(0, 18) == "reported resource ",
                        e.what());
    return 0;
  }
  // Accepted output has a string "name": the resource's, so the name is valid UTF-8 text.
  const std::string printed =
      nlohmann::json{{"name", name}, {"addresses", addresses}, {"extra", 1}}.dump();
  std::vector<std::string> again;
  try {
    again = parseDiscoveryOutput(printed, name);
  } catch (const DiscoveryOutputError& e) {
    DOCKHAND_FUZZ_CHECK(false, printed + ": " + e.what());
  }
  DOCKHAND_FUZZ_CHECK(again == addresses, printed);
  return 0;
}
