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
  kHealth,     // /healthz
  kStatus,     // /v1/status
  kMetrics,    // /metrics
  kReady,      // /readyz
  kBlock,      // /blocks/<valid id>
  kInvalidId,  // /blocks/<anything that is not a block id>
  kNotFound,   // any other path
};

struct RoutedRequest {
  BlockRoute route = BlockRoute::kNotFound;
  std::string path;  // the URI without its query
  std::string id;    // kBlock and kInvalidId: what follows "/blocks/"
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

}  // namespace dockhand::agent
