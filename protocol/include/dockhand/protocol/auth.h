// Authentication between agents and drivers that share a cluster secret (docs/security.md).
//
// Two uses of one secret, each with messages of its own so that a MAC made for one can never
// pass for the other:
//
//  * The Hello handshake (docs/protocol.md 6.2): each side sends a fresh random nonce and
//    proves it knows the secret with HMAC-SHA256 over a message that binds its role and both
//    nonces. The secret never crosses the wire; a recorded exchange is useless on a new
//    connection (the other side's nonce is new), and a proof cannot be reflected back to its
//    sender (the role differs).
//  * Block server requests (docs/blocks.md): an `Authorization` header carrying a timestamp,
//    a nonce and HMAC-SHA256 over method, path, content checksum, timestamp and nonce. The
//    server accepts a bounded clock skew and remembers the nonces it has seen for as long as
//    a timestamp stays acceptable, so a captured request cannot be replayed.
//
// Everything here is pure (no sockets, no clock reads: the caller passes the time) except
// randomNonce(), which reads the kernel's CSPRNG, and loadSecretFile(), which reads a file.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

#include "dockhand/base/result.h"

namespace dockhand::protocol::auth {

// The scheme named in Hello's `auth` member and in the Authorization header.
inline constexpr std::string_view kHelloScheme = "hmac-sha256";
inline constexpr std::string_view kHeaderScheme = "Dockhand-HMAC-SHA256";

// Bounds of a secret file's content (after a trailing newline is dropped).
inline constexpr std::size_t kMinSecretBytes = 16;
inline constexpr std::size_t kMaxSecretBytes = 4096;

// The cluster secret. It has no way to print itself: nothing logs it by accident.
class ClusterSecret {
 public:
  explicit ClusterSecret(std::string bytes) : bytes_(std::move(bytes)) {}
  ClusterSecret(const ClusterSecret&) = default;
  ClusterSecret& operator=(const ClusterSecret&) = default;
  ~ClusterSecret();
  // HMAC-SHA256 of `message` under the secret, as 64 lowercase hex digits.
  std::string mac(std::string_view message) const;

 private:
  std::string bytes_;
};

// A secret file that cannot be used; what() says which file and why, never its content.
class SecretError : public std::runtime_error {
 public:
  explicit SecretError(const std::string& what) : std::runtime_error(what) {}
};

// Reads the cluster secret from `path`. Refused (SecretError) when the file is not a regular
// file, is readable or writable by group or others (mode & 077: "chmod 600 FILE"), cannot be
// read, or holds fewer than kMinSecretBytes or more than kMaxSecretBytes bytes. One trailing
// newline ("\n" or "\r\n") is not part of the secret.
ClusterSecret loadSecretFile(const std::string& path);

// HMAC-SHA256 (RFC 2104) of `message` under `key`, as 32 raw bytes.
std::string hmacSha256(std::string_view key, std::string_view message);
std::string toHex(std::string_view bytes);

// Compares in time that depends only on the lengths, not on where the inputs differ.
bool equalConstantTime(std::string_view a, std::string_view b);

// 16 bytes from the kernel's CSPRNG (getrandom), as 32 lowercase hex digits. Throws
// std::runtime_error when the kernel gives none.
std::string randomNonce();

// A nonce a peer sent is 32 to 128 hex digits.
bool validNonce(std::string_view nonce);

// ---- the Hello handshake --------------------------------------------------------------------

// The proof `role` ("agent" or "driver") sends: hex HMAC over
// "dockhand-hello-v1\n<role>\n<agent_nonce>\n<driver_nonce>".
std::string helloProof(const ClusterSecret& secret, std::string_view role,
                       std::string_view agent_nonce, std::string_view driver_nonce);
// Whether `proof` is `role`'s proof for these nonces (constant-time compare).
bool checkHelloProof(const ClusterSecret& secret, std::string_view role,
                     std::string_view agent_nonce, std::string_view driver_nonce,
                     std::string_view proof);

// ---- block server requests ------------------------------------------------------------------

// What a signed request binds. `content` is the X-Dockhand-Checksum header of a PUT (the
// body's checksum, checked by the server over what arrives), empty for GET and HEAD.
struct RequestToSign {
  std::string_view method;
  std::string_view path;  // the request target without the query, e.g. "/blocks/rdd_1_2"
  std::string_view content;
};

// The value of the Authorization header:
// "Dockhand-HMAC-SHA256 ts=<ms since the epoch>,nonce=<32 hex>,mac=<64 hex>", the mac over
// "dockhand-block-v1\n<METHOD>\n<path>\n<content>\n<ts>\n<nonce>".
std::string signRequest(const ClusterSecret& secret, const RequestToSign& request,
                        std::int64_t now_ms, std::string_view nonce);

// The Authorization header for one request (method, path, content), or "" when there is no
// secret to sign with. Thread-safe.
using RequestSigner = std::function<std::string(std::string_view method, std::string_view path,
                                                std::string_view content)>;
// Signs with `secret`, the wall clock and a fresh nonce per call.
RequestSigner makeRequestSigner(const ClusterSecret& secret);
// Milliseconds since the Unix epoch (the clock signatures carry).
std::int64_t wallClockMs();

// Checks Authorization headers on a server. Thread-safe. Remembers each accepted nonce until
// its timestamp falls out of the skew window, at most `max_remembered` at once: beyond that
// requests are refused (a flood cannot make the cache forget what it must refuse).
class RequestVerifier {
 public:
  RequestVerifier(const ClusterSecret& secret, std::int64_t max_skew_ms = 60000,
                  std::size_t max_remembered = 200000);

  // Succeeds when the request is accepted (and the nonce is now spent). Otherwise the error
  // says why it is refused, one line for the 401 body and the log; it never contains the secret
  // or the expected MAC.
  Result<void> verify(std::string_view header, const RequestToSign& request, std::int64_t now_ms);

  std::int64_t maxSkewMs() const { return max_skew_ms_; }
  std::size_t remembered() const;

 private:
  void forgetExpired(std::int64_t now_ms);

  ClusterSecret secret_;
  std::int64_t max_skew_ms_;
  std::size_t max_remembered_;
  mutable std::mutex mutex_;
  std::map<std::string, std::int64_t, std::less<>> seen_;  // nonce -> when it may be forgotten
  std::multimap<std::int64_t, std::string> expiry_;        // forget-at -> nonce
};

}  // namespace dockhand::protocol::auth
