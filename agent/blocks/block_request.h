// What the block server reads from a request before it touches the store: the route a
// request path names and the byte range a Range header asks for. Pure functions, apart from
// the server's Poco handler so that tests and the fuzz targets call exactly what it runs.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace dockhand::agent {

// Where a request goes, read from its URI (the query, if any, is ignored).
enum class BlockRoute {
  kHealth,      // /healthz
  kStatus,      // /v1/status
  kMetrics,     // /metrics
  kReady,       // /readyz
  kBlock,       // /blocks/<valid id>
  kInvalidId,   // /blocks/<anything that is not a block id>
  kAgentLog,    // /v1/logs/agent/<stream>
  kTaskLog,     // /v1/tasks/<task id>/logs/<stream>
  kBadLogPath,  // under /v1/logs/ or /v1/tasks/ but none of the above (answered 400)
  kNotFound,    // any other path
};

struct RoutedRequest {
  BlockRoute route = BlockRoute::kNotFound;
  std::string path;   // the URI without its query
  std::string query;  // what follows the first '?', "" when none
  std::string id;     // kBlock and kInvalidId: what follows "/blocks/"
  // kAgentLog and kTaskLog: the stream's name, a plain name of [a-z0-9_] (whether the agent
  // has such a stream is the server's answer: 404 when not). kTaskLog: the task's id.
  std::string stream;
  std::uint64_t task_id = 0;
  std::string error;  // kBadLogPath: what is wrong with the path, one line
};

RoutedRequest routeBlockRequest(std::string_view uri);

// A "Range: bytes=..." header for a block of some size: bytes [first, last], or a range no
// byte of the block satisfies (answered 416).
struct ByteRange {
  std::uint64_t first = 0;
  std::uint64_t last = 0;
  bool satisfiable = true;
};

// The range of `header` over a block of `size` bytes. nullopt when the header is not one
// usable single range (unknown unit, several ranges, malformed numbers): the server then
// sends the whole block, as RFC 9110 allows. A satisfiable range has first <= last < size.
std::optional<ByteRange> parseRange(std::string_view header, std::uint64_t size);

// The part of a log a request asks for, from its query (`start`, `length`) and its Range
// header, over a log of `size` bytes.
//
//   ?start=N         from byte N; a negative N counts from the end (start=-4096: the last 4 KiB)
//   &length=M        at most M bytes (M >= 0); without it, to the end
//   Range: bytes=... one range as for a block (answered 206 with Content-Range)
//
// Both forms in one request, an unknown query parameter, a malformed number or a Range header
// that is not one usable byte range is an error (400). A start at or beyond the end of a
// non-empty log, or a Range no byte satisfies, is unsatisfiable (416). Neither: the whole log.
struct LogWindow {
  enum class Kind { kWhole, kQuery, kRange, kUnsatisfiable, kBad };
  Kind kind = Kind::kWhole;
  std::uint64_t first = 0;
  std::uint64_t count = 0;  // bytes from `first`; first + count <= size
  std::string error;        // kBad and kUnsatisfiable: why, one line
};
LogWindow parseLogWindow(std::string_view query, std::optional<std::string_view> range_header,
                         std::uint64_t size);

}  // namespace dockhand::agent
