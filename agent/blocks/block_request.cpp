#include "blocks/block_request.h"

#include <algorithm>
#include <charconv>

#include "blocks/block_id.h"

namespace dockhand::agent {
namespace {

constexpr std::string_view kBlocksPrefix = "/blocks/";

bool parseNumber(std::string_view text, std::uint64_t& out) {
  if (text.empty()) return false;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && end == text.data() + text.size();
}

}  // namespace

RoutedRequest routeBlockRequest(std::string_view uri) {
  RoutedRequest out;
  if (auto q = uri.find('?'); q != std::string_view::npos) uri = uri.substr(0, q);
  out.path = std::string(uri);
  if (uri == "/healthz") {
    out.route = BlockRoute::kHealth;
  } else if (uri == "/v1/status") {
    out.route = BlockRoute::kStatus;
  } else if (uri == "/metrics") {
    out.route = BlockRoute::kMetrics;
  } else if (uri == "/readyz") {
    out.route = BlockRoute::kReady;
  } else if (uri.substr(0, kBlocksPrefix.size()) == kBlocksPrefix) {
    out.id = std::string(uri.substr(kBlocksPrefix.size()));
    out.route = isValidBlockId(out.id) ? BlockRoute::kBlock : BlockRoute::kInvalidId;
  }
  return out;
}

std::optional<ByteRange> parseRange(std::string_view header, std::uint64_t size) {
  constexpr std::string_view kUnit = "bytes=";
  std::string_view spec = header;
  if (spec.substr(0, kUnit.size()) != kUnit) return std::nullopt;
  spec.remove_prefix(kUnit.size());
  if (spec.find(',') != std::string_view::npos) return std::nullopt;
  auto dash = spec.find('-');
  if (dash == std::string_view::npos) return std::nullopt;
  std::string_view a = spec.substr(0, dash);
  std::string_view b = spec.substr(dash + 1);
  ByteRange range;
  std::uint64_t first = 0;
  std::uint64_t last = 0;
  if (a.empty()) {  // suffix: the last n bytes
    std::uint64_t n = 0;
    if (!parseNumber(b, n)) return std::nullopt;
    if (n == 0 || size == 0) {
      range.satisfiable = false;
      return range;
    }
    range.first = n >= size ? 0 : size - n;
    range.last = size - 1;
    return range;
  }
  if (!parseNumber(a, first)) return std::nullopt;
  if (b.empty()) {
    last = size == 0 ? 0 : size - 1;
  } else if (!parseNumber(b, last) || last < first) {
    return std::nullopt;
  }
  if (first >= size) {
    range.satisfiable = false;
    return range;
  }
  range.first = first;
  range.last = std::min(last, size - 1);
  return range;
}

}  // namespace dockhand::agent
