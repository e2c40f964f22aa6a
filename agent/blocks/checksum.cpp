#include "blocks/checksum.h"

#include <fcntl.h>
#include <unistd.h>
#include <xxhash.h>

#include <cerrno>
#include <system_error>
#include <vector>

#include "dockhand/checksum.hpp"

namespace dockhand::agent {

Xxh64::Xxh64() : state_(XXH64_createState()) {
  if (state_ == nullptr) throw std::bad_alloc();
  XXH64_reset(static_cast<XXH64_state_t*>(state_), 0);
}

Xxh64::~Xxh64() { XXH64_freeState(static_cast<XXH64_state_t*>(state_)); }

void Xxh64::update(const void* data, std::size_t size) {
  XXH64_update(static_cast<XXH64_state_t*>(state_), data, size);
}

std::uint64_t Xxh64::value() const {
  return XXH64_digest(static_cast<const XXH64_state_t*>(state_));
}

std::string Xxh64::text() const { return formatChecksum(value()); }

// The format is the SDK's (dockhand/checksum.hpp), so plugins and the agent write it alike.
std::string formatChecksum(std::uint64_t value) { return sdk::formatChecksum(value); }

std::optional<std::uint64_t> parseChecksum(std::string_view text) {
  std::uint64_t value = 0;
  if (!sdk::parseChecksum(text, value)) return std::nullopt;
  return value;
}

int readToEnd(int fd, std::vector<char>& buffer,
              const std::function<void(const char* data, std::size_t size)>& piece) {
  for (;;) {
    ssize_t n = ::read(fd, buffer.data(), buffer.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno;
    if (n == 0) return 0;
    piece(buffer.data(), static_cast<std::size_t>(n));
  }
}

std::string checksumOfFile(const std::filesystem::path& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw std::system_error(errno, std::generic_category(), "open " + path.string());
  Xxh64 hash;
  std::vector<char> buffer(1 << 20);
  const int error =
      readToEnd(fd, buffer, [&](const char* data, std::size_t size) { hash.update(data, size); });
  ::close(fd);
  if (error != 0) throw std::system_error(error, std::generic_category(), "read " + path.string());
  return hash.text();
}

}  // namespace dockhand::agent
