// fetchBlock: copies a block another agent (or an external store) serves (GET <url>) into a
// local file, verified; probeBlock: whether it could.
#pragma once

#include <atomic>
#include <chrono>
#include <filesystem>
#include <stdexcept>

#include <Poco/Net/Context.h>

#include "dockhand/base/result.h"
#include "dockhand/protocol/auth.h"
#include "dockhand/protocol/messages.h"

namespace dockhand::agent {

// How long one read or write of a fetch may wait on the serving side.
constexpr std::chrono::milliseconds kFetchTimeout{30000};

class FetchError : public std::runtime_error {
 public:
  explicit FetchError(const std::string& what, bool retryable = false)
      : std::runtime_error(what), retryable_(retryable) {}
  // The same GET may succeed later: the server could not be reached or answered 503, or the
  // connection broke mid-block (an agent restarting in place). Not for an answer about the
  // block itself (404, a checksum mismatch) or a refusal (TLS, authentication).
  bool retryable() const { return retryable_; }

 private:
  bool retryable_;
};

// GETs input.url into `dest`: the bytes go to "<dest>.part" and are renamed to `dest` only once
// the size (when input.size > 0) and the checksum (when given) match. Checks `cancelled`
// between pieces and stops early when it is set. With a `signer` the GET carries its
// Authorization header (a cluster that authenticates). With a TLS client context the URL must
// be https:// (the server's certificate is verified against the context's CA); without one it
// must be http://. Blocking; call it off the core thread.
// Throws FetchError "block <id> from <url>: <why>".
//
// fetchBlockRetrying: the same, tried again while the failure is retryable, after 100 ms,
// then twice as long each time (at most 2 s), until `window` has passed since the first try
// or `cancelled` is set.
void fetchBlock(const protocol::InputBlock& input, const std::filesystem::path& dest,
                const std::atomic<bool>& cancelled, std::chrono::milliseconds timeout,
                const protocol::auth::RequestSigner& signer = {},
                const Poco::Net::Context::Ptr& tls = {});
void fetchBlockRetrying(const protocol::InputBlock& input, const std::filesystem::path& dest,
                        const std::atomic<bool>& cancelled, std::chrono::milliseconds timeout,
                        std::chrono::milliseconds window,
                        const protocol::auth::RequestSigner& signer = {},
                        const Poco::Net::Context::Ptr& tls = {});

// Whether a reader of this agent could GET input.url now (same URL rule, signer and TLS as
// fetchBlock): a HEAD answered 200, with input.size bytes when both are known. Blocking.
Result<void> probeBlock(const protocol::InputBlock& input, std::chrono::milliseconds timeout,
                        const protocol::auth::RequestSigner& signer = {},
                        const Poco::Net::Context::Ptr& tls = {});

}  // namespace dockhand::agent
