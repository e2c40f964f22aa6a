#include "dockhand/protocol/auth.h"

#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstring>

#include <Poco/SHA2Engine.h>
#include <fmt/format.h>

namespace dockhand::protocol::auth {

namespace {

constexpr std::size_t kShaBlock = 64;

std::string sha256(std::string_view a, std::string_view b) {
  Poco::SHA2Engine engine(Poco::SHA2Engine::SHA_256);
  engine.update(a.data(), a.size());
  engine.update(b.data(), b.size());
  const auto& digest = engine.digest();
  return std::string(digest.begin(), digest.end());
}

bool isHex(std::string_view text) {
  for (char c : text) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'))) {
      return false;
    }
  }
  return true;
}

std::string blockMessage(const RequestToSign& r, std::string_view ts, std::string_view nonce) {
  return fmt::format("dockhand-block-v1\n{}\n{}\n{}\n{}\n{}", r.method, r.path, r.content, ts,
                     nonce);
}

}  // namespace

ClusterSecret::~ClusterSecret() {
  if (!bytes_.empty()) ::explicit_bzero(bytes_.data(), bytes_.size());
}

std::string ClusterSecret::mac(std::string_view message) const {
  return toHex(hmacSha256(bytes_, message));
}

std::string hmacSha256(std::string_view key, std::string_view message) {
  std::string k(key);
  if (k.size() > kShaBlock) k = sha256(k, {});
  k.resize(kShaBlock, '\0');
  std::string inner_pad(kShaBlock, '\0');
  std::string outer_pad(kShaBlock, '\0');
  for (std::size_t i = 0; i < kShaBlock; ++i) {
    inner_pad[i] = static_cast<char>(k[i] ^ 0x36);
    outer_pad[i] = static_cast<char>(k[i] ^ 0x5c);
  }
  std::string result = sha256(outer_pad, sha256(inner_pad, message));
  ::explicit_bzero(k.data(), k.size());
  ::explicit_bzero(inner_pad.data(), inner_pad.size());
  ::explicit_bzero(outer_pad.data(), outer_pad.size());
  return result;
}

std::string toHex(std::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) {
    auto b = static_cast<unsigned char>(c);
    out.push_back(kDigits[b >> 4]);
    out.push_back(kDigits[b & 0xf]);
  }
  return out;
}

bool equalConstantTime(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  }
  return diff == 0;
}

std::string randomNonce() {
  unsigned char bytes[16];
  std::size_t got = 0;
  while (got < sizeof bytes) {
    ssize_t n = ::getrandom(bytes + got, sizeof bytes - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      throw std::runtime_error(fmt::format("getrandom failed: {}", std::strerror(errno)));
    }
    got += static_cast<std::size_t>(n);
  }
  return toHex(std::string_view(reinterpret_cast<const char*>(bytes), sizeof bytes));
}

bool validNonce(std::string_view nonce) {
  return nonce.size() >= 32 && nonce.size() <= 128 && isHex(nonce);
}

ClusterSecret loadSecretFile(const std::string& path) {
  auto fail = [&](const std::string& why) {
    return SecretError(fmt::format("cluster secret file {}: {}", path, why));
  };
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) {
    if (errno == ELOOP) throw fail("is a symbolic link; name the file itself");
    throw fail(fmt::format("cannot open: {}", std::strerror(errno)));
  }
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw fail(fmt::format("cannot stat: {}", std::strerror(errno)));
  if (!S_ISREG(st.st_mode)) throw fail("is not a regular file");
  if ((st.st_mode & 077) != 0) {
    throw fail(fmt::format(
        "is accessible by group or others (mode {:04o}); it must be readable by its owner "
        "only: chmod 600 {}",
        st.st_mode & 07777, path));
  }
  if (st.st_size > static_cast<off_t>(kMaxSecretBytes + 2)) {
    throw fail(fmt::format("holds {} bytes; a secret has at most {}", st.st_size, kMaxSecretBytes));
  }
  std::string bytes(kMaxSecretBytes + 3, '\0');
  std::size_t got = 0;
  for (;;) {
    ssize_t n = ::read(fd, bytes.data() + got, bytes.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw fail(fmt::format("cannot read: {}", std::strerror(errno)));
    if (n == 0) break;
    got += static_cast<std::size_t>(n);
    if (got == bytes.size()) break;
  }
  bytes.resize(got);
  if (!bytes.empty() && bytes.back() == '\n') bytes.pop_back();
  if (!bytes.empty() && bytes.back() == '\r') bytes.pop_back();
  if (bytes.size() < kMinSecretBytes) {
    throw fail(
        fmt::format("holds {} bytes; a secret needs at least {} (e.g. head -c 32 "
                    "/dev/urandom | base64 > FILE)",
                    bytes.size(), kMinSecretBytes));
  }
  if (bytes.size() > kMaxSecretBytes) {
    throw fail(fmt::format("holds more than {} bytes", kMaxSecretBytes));
  }
  ClusterSecret secret(bytes);
  ::explicit_bzero(bytes.data(), bytes.size());
  return secret;
}

std::string helloProof(const ClusterSecret& secret, std::string_view role,
                       std::string_view agent_nonce, std::string_view driver_nonce) {
  return secret.mac(fmt::format("dockhand-hello-v1\n{}\n{}\n{}", role, agent_nonce, driver_nonce));
}

bool checkHelloProof(const ClusterSecret& secret, std::string_view role,
                     std::string_view agent_nonce, std::string_view driver_nonce,
                     std::string_view proof) {
  return equalConstantTime(helloProof(secret, role, agent_nonce, driver_nonce), proof);
}

std::string signRequest(const ClusterSecret& secret, const RequestToSign& request,
                        std::int64_t now_ms, std::string_view nonce) {
  const std::string ts = std::to_string(now_ms);
  return fmt::format("{} ts={},nonce={},mac={}", kHeaderScheme, ts, nonce,
                     secret.mac(blockMessage(request, ts, nonce)));
}

std::int64_t wallClockMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

RequestSigner makeRequestSigner(const ClusterSecret& secret) {
  return [secret](std::string_view method, std::string_view path, std::string_view content) {
    return signRequest(secret, RequestToSign{.method = method, .path = path, .content = content},
                       wallClockMs(), randomNonce());
  };
}

RequestVerifier::RequestVerifier(const ClusterSecret& secret, std::int64_t max_skew_ms,
                                 std::size_t max_remembered)
    : secret_(secret), max_skew_ms_(max_skew_ms), max_remembered_(max_remembered) {}

std::size_t RequestVerifier::remembered() const {
  std::lock_guard lock(mutex_);
  return seen_.size();
}

void RequestVerifier::forgetExpired(std::int64_t now_ms) {
  while (!expiry_.empty() && expiry_.begin()->first < now_ms) {
    seen_.erase(expiry_.begin()->second);
    expiry_.erase(expiry_.begin());
  }
}

Result<void> RequestVerifier::verify(std::string_view header, const RequestToSign& request,
                                     std::int64_t now_ms) {
  if (header.empty()) {
    return Error(std::string("this server requires signed requests (Authorization: ") +
                 std::string(kHeaderScheme) + "); the client holds no cluster secret");
  }
  if (header.substr(0, kHeaderScheme.size()) != kHeaderScheme ||
      header.size() == kHeaderScheme.size() || header[kHeaderScheme.size()] != ' ') {
    return Error("the Authorization header is not " + std::string(kHeaderScheme));
  }
  std::string_view ts;
  std::string_view nonce;
  std::string_view mac;
  std::string_view rest = header.substr(kHeaderScheme.size() + 1);
  while (!rest.empty()) {
    auto comma = rest.find(',');
    std::string_view item = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    auto eq = item.find('=');
    if (eq == std::string_view::npos) return Error(std::string("malformed Authorization header"));
    std::string_view key = item.substr(0, eq);
    std::string_view value = item.substr(eq + 1);
    if (key == "ts") {
      ts = value;
    } else if (key == "nonce") {
      nonce = value;
    } else if (key == "mac") {
      mac = value;
    }
  }
  std::int64_t when = 0;
  auto [end, ec] = std::from_chars(ts.data(), ts.data() + ts.size(), when);
  if (ts.empty() || ec != std::errc() || end != ts.data() + ts.size()) {
    return Error(std::string("malformed Authorization header: ts= is not a number"));
  }
  if (!validNonce(nonce)) {
    return Error(std::string("malformed Authorization header: nonce= is not 32 to 128 hex digits"));
  }
  if (mac.size() != 64 || !isHex(mac)) {
    return Error(std::string("malformed Authorization header: mac= is not 64 hex digits"));
  }
  const std::int64_t skew = when > now_ms ? when - now_ms : now_ms - when;
  if (skew > max_skew_ms_) {
    return Error(fmt::format(
        "request timestamp is {} ms away from this server's clock (at most {} ms allowed): "
        "synchronize the clocks",
        skew, max_skew_ms_));
  }
  if (!equalConstantTime(secret_.mac(blockMessage(request, ts, nonce)), mac)) {
    return Error(
        std::string("signature does not match: the client holds a different cluster secret, or the "
                    "request was altered"));
  }
  std::lock_guard lock(mutex_);
  forgetExpired(now_ms);
  if (seen_.count(nonce) != 0) return Error(std::string("replayed request (nonce already used)"));
  if (seen_.size() >= max_remembered_) {
    return Error(fmt::format("too many signed requests within {} ms; retry later", max_skew_ms_));
  }
  // A timestamp stays acceptable until when + max_skew: remember the nonce until then.
  const std::int64_t forget_at = when + max_skew_ms_;
  seen_.emplace(std::string(nonce), forget_at);
  expiry_.emplace(forget_at, std::string(nonce));
  return {};
}

}  // namespace dockhand::protocol::auth
