#include "blocks/checksum.h"

#include <fcntl.h>
#include <unistd.h>
#include <xxhash.h>

#include <cerrno>
#include <system_error>
#include <vector>

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

std::string formatChecksum(std::uint64_t value) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out = "xxh64:";
  for (int shift = 60; shift >= 0; shift -= 4) out.push_back(kHex[(value >> shift) & 0xf]);
  return out;
}

std::optional<std::uint64_t> parseChecksum(std::string_view text) {
  constexpr std::string_view kPrefix = "xxh64:";
  if (text.size() != kPrefix.size() + 16 || text.substr(0, kPrefix.size()) != kPrefix) {
    return std::nullopt;
  }
  std::uint64_t value = 0;
  for (char c : text.substr(kPrefix.size())) {
    int digit;
    if (c >= '0' && c <= '9') {
      digit = c - '0';
    } else if (c >= 'a' && c <= 'f') {
      digit = c - 'a' + 10;
    } else if (c >= 'A' && c <= 'F') {
      digit = c - 'A' + 10;
    } else {
      return std::nullopt;
    }
    value = (value << 4) | static_cast<std::uint64_t>(digit);
  }
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
