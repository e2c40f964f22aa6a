// The channel between the library runner and one of its worker processes: a Unix stream
// socket carrying messages, each a 4-byte little-endian length and that many bytes of JSON (an
// object whose "t" names its type). The types are listed in worker_pool.h.
//
// Threads: a MessageReader belongs to one reader; sendMessage() from several threads needs
// the caller's lock (a message must not be interleaved with another).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <utility>

#include <sys/types.h>

#include <nlohmann/json.hpp>

namespace dockhand::plugins::library {

// A message longer than this ends the channel (both sides are ours: it is a bug).
inline constexpr std::uint32_t kMaxWorkerMessage = 64U << 20U;

// The message as bytes on the wire.
std::string frameMessage(const nlohmann::json& message);

// Writes all of `bytes` to the blocking socket `fd`; false when the peer is gone.
bool writeAll(int fd, const std::string& bytes);

// What the runner has yet to write to one worker: message bytes, and descriptors that go with
// the first byte of their message (SCM_RIGHTS: a run's job library, opened and checked by the
// runner). Owns the descriptors it holds; one thread at a time (the pool's lock).
class Outbox {
 public:
  Outbox() = default;
  ~Outbox() { clear(); }
  Outbox(const Outbox&) = delete;
  Outbox& operator=(const Outbox&) = delete;

  // Queues `bytes`; `pass` (taken; -1 for none) goes with their first byte.
  void append(const std::string& bytes, int pass = -1);
  bool empty() const { return bytes_.empty(); }
  // Writes what the non-blocking `socket` takes. Returns 0 when all is written, EAGAIN when
  // the rest must wait for the socket, or the errno that ended the channel.
  int flush(int socket);
  // Drops what is queued and closes its descriptors.
  void clear();

 private:
  std::string bytes_;
  std::deque<std::pair<std::size_t, int>> descriptors_;  // offset into bytes_, descriptor
};

// Reads what `socket` has (blocking as it is) into `buffer`; descriptors that came with the
// bytes (close-on-exec) are appended to `received`. Returns what read() would.
ssize_t receiveWithDescriptors(int socket, char* buffer, std::size_t size,
                               std::deque<int>& received);

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
