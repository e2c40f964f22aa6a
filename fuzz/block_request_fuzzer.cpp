// What the block server reads from a request before it touches the store: the route of a
// request URI, the Range header (over a block size taken from the input too), and the
// checksum header of a PUT. The input is "<uri>\n<range header>\n<block size>\n<checksum>".
// A block route carries a valid id; a satisfiable range lies inside the block.
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "blocks/block_id.h"
#include "blocks/block_request.h"
#include "blocks/checksum.h"
#include "fuzz_check.h"

using dockhand::agent::BlockRoute;

namespace {

// The next line of `input` (without its newline); the rest stays in `input`.
std::string_view nextLine(std::string_view& input) {
  const auto end = input.find('\n');
  std::string_view line = input.substr(0, end);
  input = end == std::string_view::npos ? std::string_view() : input.substr(end + 1);
  return line;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  const std::string_view uri = nextLine(input);
  const std::string_view range_header = nextLine(input);
  const std::string_view size_text = nextLine(input);
  const std::string_view checksum = nextLine(input);

  const auto routed = dockhand::agent::routeBlockRequest(uri);
  DOCKHAND_FUZZ_CHECK(routed.path.find('?') == std::string::npos, routed.path);
  DOCKHAND_FUZZ_CHECK(uri.substr(0, routed.path.size()) == routed.path, routed.path);
  switch (routed.route) {
    case BlockRoute::kBlock:
      DOCKHAND_FUZZ_CHECK(dockhand::agent::isValidBlockId(routed.id), routed.id);
      DOCKHAND_FUZZ_CHECK(routed.path == "/blocks/" + routed.id, routed.path);
      break;
    case BlockRoute::kInvalidId:
      DOCKHAND_FUZZ_CHECK(!dockhand::agent::isValidBlockId(routed.id), routed.id);
      break;
    case BlockRoute::kAgentLog:
    case BlockRoute::kTaskLog:
      DOCKHAND_FUZZ_CHECK(!routed.stream.empty() && routed.stream.find('/') == std::string::npos &&
                              routed.stream.find('.') == std::string::npos,
                          routed.stream);
      break;
    case BlockRoute::kBadLogPath:
      DOCKHAND_FUZZ_CHECK(!routed.error.empty(), routed.path);
      break;
    case BlockRoute::kHealth:
    case BlockRoute::kStatus:
    case BlockRoute::kMetrics:
    case BlockRoute::kReady:
    case BlockRoute::kNotFound:
      DOCKHAND_FUZZ_CHECK(routed.id.empty(), routed.id);
      break;
  }

  std::uint64_t block_size = 0;
  std::from_chars(size_text.data(), size_text.data() + size_text.size(), block_size);
  if (auto range = dockhand::agent::parseRange(range_header, block_size)) {
    if (range->satisfiable) {
      DOCKHAND_FUZZ_CHECK(range->first <= range->last && range->last < block_size,
                          std::string(range_header) + " over " + std::to_string(block_size));
    } else {
      DOCKHAND_FUZZ_CHECK(block_size == 0 || range_header.find('-') != std::string_view::npos,
                          std::string(range_header));
    }
  }

  // The same lines as a log request: the URI's query and the Range header over the size.
  const auto window = dockhand::agent::parseLogWindow(
      routed.query, range_header.empty() ? std::nullopt : std::optional(range_header), block_size);
  if (window.kind != dockhand::agent::LogWindow::Kind::kBad &&
      window.kind != dockhand::agent::LogWindow::Kind::kUnsatisfiable) {
    DOCKHAND_FUZZ_CHECK(window.first <= block_size && window.count <= block_size - window.first,
                        std::string(uri) + " " + std::string(range_header));
  }

  if (auto value = dockhand::agent::parseChecksum(checksum)) {
    std::string lower(checksum);
    for (char& c : lower) {
      if (c >= 'A' && c <= 'F') c = static_cast<char>(c - 'A' + 'a');
    }
    DOCKHAND_FUZZ_CHECK(dockhand::agent::formatChecksum(*value) == lower, lower);
  }
  return 0;
}
