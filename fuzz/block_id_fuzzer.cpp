// Block ids, from task descriptions, block URLs and UpdateBlockInfo: parseBlockId decides what
// may become a file name in the block store, so what it accepts must never leave the store's
// directory, and must have exactly the documented form (block_id.h).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "blocks/block_id.h"
#include "fuzz_check.h"

using dockhand::agent::BlockKind;
using dockhand::agent::parseBlockId;

namespace {

bool digits(std::string_view text) {
  if (text.empty() || text.size() > 19) return false;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

// The documented form, written independently of the parser: "<kind>_" and its numbers.
bool numbersMatch(std::string_view rest, std::size_t count) {
  for (std::size_t i = 0; i < count; ++i) {
    const auto end = i + 1 < count ? rest.find('_') : rest.size();
    if (end == std::string_view::npos || !digits(rest.substr(0, end))) return false;
    rest = i + 1 < count ? rest.substr(end + 1) : std::string_view();
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view id(reinterpret_cast<const char*>(data), size);
  const auto kind = parseBlockId(id);
  if (!kind) return 0;
  const std::string text(id);
  DOCKHAND_FUZZ_CHECK(!id.empty() && id.size() <= 255, text);
  DOCKHAND_FUZZ_CHECK(id != "." && id != ".." && id.find('/') == std::string_view::npos, text);
  DOCKHAND_FUZZ_CHECK(id.find('\0') == std::string_view::npos, text);
  DOCKHAND_FUZZ_CHECK(id.rfind(std::string(dockhand::agent::toString(*kind)) + "_", 0) == 0, text);
  switch (*kind) {
    case BlockKind::kShuffle:
      DOCKHAND_FUZZ_CHECK(numbersMatch(id.substr(8), 3), text);
      break;
    case BlockKind::kRdd:
      DOCKHAND_FUZZ_CHECK(numbersMatch(id.substr(4), 2), text);
      break;
    case BlockKind::kTask: {
      const auto rest = id.substr(5);
      const auto sep = rest.find('_');
      DOCKHAND_FUZZ_CHECK(sep != std::string_view::npos && digits(rest.substr(0, sep)), text);
      const auto name = rest.substr(sep + 1);
      DOCKHAND_FUZZ_CHECK(!name.empty() && name.size() <= 200 && name.front() != '.', text);
      for (char c : name) {
        const bool allowed = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                             (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
        DOCKHAND_FUZZ_CHECK(allowed, text);
      }
      break;
    }
  }
  return 0;
}
