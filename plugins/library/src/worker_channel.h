// The channel between the library runner and one of its worker processes: a Unix stream
// socket carrying messages, each a 4-byte little-endian length and that many bytes of JSON (an
// object whose "t" names its type). The types are listed in worker_pool.h.
//
// Threads: a MessageReader belongs to one reader; sendMessage() from several threads needs
// the caller's lock (a message must not be interleaved with another).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace dockhand::plugins::library {

// A message longer than this ends the channel (both sides are ours: it is a bug).
inline constexpr std::uint32_t kMaxWorkerMessage = 64U << 20U;

// The message as bytes on the wire.
std::string frameMessage(const nlohmann::json& message);

// Writes all of `bytes` to the blocking socket `fd`; false when the peer is gone.
bool writeAll(int fd, const std::string& bytes);

class MessageReader {
 public:
  // Appends what a read() returned.
  void feed(const char* data, std::size_t size) { buffer_.append(data, size); }
  // The next whole message, or nullopt when more bytes are needed. Throws std::runtime_error
  // when the bytes are not a message (too long, not JSON, not an object).
  std::optional<nlohmann::json> next();

 private:
  std::string buffer_;
  std::size_t offset_ = 0;
};

}  // namespace dockhand::plugins::library
