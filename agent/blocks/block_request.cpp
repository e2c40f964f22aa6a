#include "blocks/block_request.h"

#include <algorithm>
#include <charconv>

#include "blocks/block_id.h"

namespace dockhand::agent {
namespace {

constexpr std::string_view kBlocksPrefix = "/blocks/";
constexpr std::string_view kAgentLogsPrefix = "/v1/logs/";
constexpr std::string_view kTasksPrefix = "/v1/tasks/";
constexpr std::size_t kMaxStreamName = 64;

// A stream name: 1 to 64 of [a-z0-9_]. Nothing else ever reaches a file name.
bool validStreamName(std::string_view name) {
  if (name.empty() || name.size() > kMaxStreamName) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
  });
}

bool parseNumber(std::string_view text, std::uint64_t& out) {
  if (text.empty()) return false;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && end == text.data() + text.size();
}

void routeLog(std::string_view uri, RoutedRequest& out) {
  out.route = BlockRoute::kBadLogPath;
  std::string_view stream;
  if (uri.starts_with(kAgentLogsPrefix)) {
    std::string_view rest = uri.substr(kAgentLogsPrefix.size());
    constexpr std::string_view kAgent = "agent/";
    if (!rest.starts_with(kAgent)) {
      out.error = "expected /v1/logs/agent/<stream> (stdout or stderr)";
      return;
    }
    stream = rest.substr(kAgent.size());
    out.route = BlockRoute::kAgentLog;
  } else {
    std::string_view rest = uri.substr(kTasksPrefix.size());
    const auto slash = rest.find('/');
    std::string_view id = rest.substr(0, slash);
    constexpr std::string_view kLogs = "/logs/";
    if (slash == std::string_view::npos || !rest.substr(slash).starts_with(kLogs)) {
      out.error = "expected /v1/tasks/<task id>/logs/<stream> (stdout or stderr)";
      return;
    }
    if (id.size() > 20 || !parseNumber(id, out.task_id)) {
      out.error = "task id '" + std::string(id.substr(0, 40)) +
                  "' is not a decimal number (expected /v1/tasks/<task id>/logs/<stream>)";
      return;
    }
    stream = rest.substr(slash + kLogs.size());
    out.route = BlockRoute::kTaskLog;
  }
  if (!validStreamName(stream)) {
    out.route = BlockRoute::kBadLogPath;
    out.error = "invalid log stream name '" + std::string(stream.substr(0, 40)) +
                "' (expected stdout or stderr)";
    return;
  }
  out.stream = std::string(stream);
}

bool parseSigned(std::string_view text, std::int64_t& out) {
  if (text.empty()) return false;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && end == text.data() + text.size();
}

}  // namespace

RoutedRequest routeBlockRequest(std::string_view uri) {
  RoutedRequest out;
  if (auto q = uri.find('?'); q != std::string_view::npos) {
    out.query = std::string(uri.substr(q + 1));
    uri = uri.substr(0, q);
  }
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
  } else if (uri.starts_with(kAgentLogsPrefix) || uri.starts_with(kTasksPrefix)) {
    routeLog(uri, out);
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

LogWindow parseLogWindow(std::string_view query, std::optional<std::string_view> range_header,
                         std::uint64_t size) {
  LogWindow window;
  auto bad = [&](std::string why) {
    window.kind = LogWindow::Kind::kBad;
    window.error = std::move(why);
    return window;
  };
  std::optional<std::int64_t> start;
  std::optional<std::uint64_t> length;
  while (!query.empty()) {
    const auto amp = query.find('&');
    std::string_view item = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    if (item.empty()) continue;
    const auto eq = item.find('=');
    std::string_view key = item.substr(0, eq);
    std::string_view value =
        eq == std::string_view::npos ? std::string_view() : item.substr(eq + 1);
    if (key == "start") {
      std::int64_t n = 0;
      if (start || !parseSigned(value, n)) {
        return bad("start must be one whole number of bytes (negative: from the end), not '" +
                   std::string(value.substr(0, 40)) + "'");
      }
      start = n;
    } else if (key == "length") {
      std::uint64_t n = 0;
      if (length || !parseNumber(value, n)) {
        return bad("length must be one whole number of bytes >= 0, not '" +
                   std::string(value.substr(0, 40)) + "'");
      }
      length = n;
    } else {
      return bad("unknown query parameter '" + std::string(key.substr(0, 40)) +
                 "' (a log takes start and length)");
    }
  }
  if (range_header && (start || length)) {
    return bad("use either a Range header or start/length, not both");
  }
  if (range_header) {
    auto range = parseRange(*range_header, size);
    if (!range) {
      return bad("Range must be one byte range (bytes=a-b, bytes=a- or bytes=-n), not '" +
                 std::string(range_header->substr(0, 60)) + "'");
    }
    if (!range->satisfiable) {
      window.kind = LogWindow::Kind::kUnsatisfiable;
      window.error = "range " + std::string(range_header->substr(0, 60)) +
                     " is not satisfiable for a log of " + std::to_string(size) + " bytes";
      return window;
    }
    window.kind = LogWindow::Kind::kRange;
    window.first = range->first;
    window.count = range->last - range->first + 1;
    return window;
  }
  if (!start && !length) {
    window.count = size;
    return window;
  }
  window.kind = LogWindow::Kind::kQuery;
  const std::int64_t from = start.value_or(0);
  if (from >= 0) {
    const auto first = static_cast<std::uint64_t>(from);
    if (first > size) {
      window.kind = LogWindow::Kind::kUnsatisfiable;
      window.error = "start " + std::to_string(first) + " is beyond the end of a log of " +
                     std::to_string(size) + " bytes";
      return window;
    }
    window.first = first;
  } else {
    // -from without overflow: INT64_MIN's magnitude is 2^63.
    const std::uint64_t back = static_cast<std::uint64_t>(-(from + 1)) + 1;
    window.first = back >= size ? 0 : size - back;
  }
  window.count = std::min(length.value_or(size), size - window.first);
  return window;
}

}  // namespace dockhand::agent
