// fetchBlock: copies a block another agent serves (GET <url>) into a local file, verified.
#pragma once

#include <atomic>
#include <chrono>
#include <filesystem>
#include <stdexcept>

#include <Poco/Net/Context.h>

#include "dockhand/protocol/auth.h"
#include "dockhand/protocol/messages.h"

namespace dockhand::agent {

class FetchError : public std::runtime_error {
 public:
  explicit FetchError(const std::string& what) : std::runtime_error(what) {}
};

// GETs input.url into `dest`: the bytes go to "<dest>.part" and are renamed to `dest` only once
// the size (when input.size > 0) and the checksum (when given) match. Checks `cancelled`
// between pieces and stops early when it is set. With a `signer` the GET carries its
// Authorization header (a cluster that authenticates). With a TLS client context the URL must
// be https:// (the server's certificate is verified against the context's CA); without one it
// must be http://. Blocking; call it off the core thread.
// Throws FetchError "block <id> from <url>: <why>".
void fetchBlock(const protocol::InputBlock& input, const std::filesystem::path& dest,
                const std::atomic<bool>& cancelled, std::chrono::milliseconds timeout,
                const protocol::auth::RequestSigner& signer = {},
                const Poco::Net::Context::Ptr& tls = {});

}  // namespace dockhand::agent
