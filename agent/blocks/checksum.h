// Block checksums: xxHash64 (seed 0), written "xxh64:<16 lower-case hex digits>". Every block
// carries one; a receiver recomputes it over the bytes it stored and refuses a mismatch.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dockhand::agent {

// An incremental xxh64 over a stream of bytes.
class Xxh64 {
 public:
  Xxh64();
  ~Xxh64();
  Xxh64(const Xxh64&) = delete;
  Xxh64& operator=(const Xxh64&) = delete;

  void update(const void* data, std::size_t size);
  std::uint64_t value() const;
  // "xxh64:0123456789abcdef"
  std::string text() const;

 private:
  void* state_;  // XXH64_state_t, kept out of this header
};

// Reads the open file `fd` from its offset to its end in pieces of `buffer`'s size and hands
// each to `piece`; a read a signal interrupts is tried again. Returns 0, or the errno of the
// read that failed. `fd` stays open (the caller's); what `piece` throws goes through.
int readToEnd(int fd, std::vector<char>& buffer,
              const std::function<void(const char* data, std::size_t size)>& piece);

std::string formatChecksum(std::uint64_t value);
// The value of "xxh64:<16 hex>", or nullopt when `text` is not in that form.
std::optional<std::uint64_t> parseChecksum(std::string_view text);
// The checksum of a file's whole content. Throws std::system_error when it cannot be read.
std::string checksumOfFile(const std::filesystem::path& path);

}  // namespace dockhand::agent
