#include "blocks/block_fetcher.h"

#include <algorithm>
#include <fstream>
#include <memory>
#include <thread>
#include <vector>

#include <Poco/Exception.h>
#include <Poco/Net/HTTPClientSession.h>
#include <Poco/Net/HTTPRequest.h>
#include <Poco/Net/HTTPResponse.h>
#include <Poco/Net/NetException.h>
#include <Poco/URI.h>

#include "blocks/checksum.h"
#include "dockhand/tls/tls.h"

namespace dockhand::agent {

namespace {

// The URL a reader of this agent can GET: https:// with TLS, else http://; why not.
Result<Poco::URI> readableUri(const std::string& url, const Poco::Net::Context::Ptr& tls) {
  Poco::URI uri;
  try {
    uri = Poco::URI(url);
  } catch (const Poco::Exception& e) {
    return Error("not a URL: " + e.displayText());
  }
  if (tls && uri.getScheme() == "http") {
    return Error(
        "refusing a plain http:// fetch: this agent uses TLS (every block server and store of "
        "a TLS cluster serves https://)");
  }
  if (uri.getScheme() != (tls ? "https" : "http") || uri.getHost().empty()) {
    return Error(tls ? "expected an https://HOST[:PORT]/PATH URL"
                     : "expected an http://HOST[:PORT]/PATH URL (https:// needs the tls section)");
  }
  return uri;
}

// Sends `method` for `uri` (signed when `signer` is set) and returns the response's stream;
// throws FetchError through `fail` for an answer other than 200, Poco's exceptions for the rest.
template <typename Fail>
std::istream& request(Poco::Net::HTTPClientSession& session, const std::string& method,
                      const Poco::URI& uri, const protocol::auth::RequestSigner& signer,
                      Poco::Net::HTTPResponse& response, const Fail& fail) {
  Poco::Net::HTTPRequest request(method, uri.getPathEtc(), Poco::Net::HTTPMessage::HTTP_1_1);
  if (signer) {
    std::string header = signer(method, uri.getPath(), "");
    if (!header.empty()) request.set("Authorization", header);
  }
  session.sendRequest(request);
  std::istream& in = session.receiveResponse(response);
  if (response.getStatus() != Poco::Net::HTTPResponse::HTTP_OK) {
    std::string body;
    if (method != Poco::Net::HTTPRequest::HTTP_HEAD) {
      body.resize(512);
      in.read(body.data(), static_cast<std::streamsize>(body.size()));
      body.resize(static_cast<std::size_t>(in.gcount()));
    }
    while (!body.empty() && (body.back() == '\n' || body.back() == '\r')) body.pop_back();
    throw fail("HTTP " + std::to_string(static_cast<int>(response.getStatus())) + " " +
                   response.getReason() + (body.empty() ? "" : ": " + body),
               response.getStatus() == Poco::Net::HTTPResponse::HTTP_SERVICE_UNAVAILABLE);
  }
  return in;
}

std::unique_ptr<Poco::Net::HTTPClientSession> session(const Poco::URI& uri,
                                                      std::chrono::milliseconds timeout,
                                                      const Poco::Net::Context::Ptr& tls) {
  auto out = tls::newClientSession(uri.getHost(), uri.getPort(), tls);
  out->setTimeout(Poco::Timespan(static_cast<long>(timeout.count() / 1000),
                                 static_cast<long>((timeout.count() % 1000) * 1000)));
  return out;
}

}  // namespace

Result<void> probeBlock(const protocol::InputBlock& input, std::chrono::milliseconds timeout,
                        const protocol::auth::RequestSigner& signer,
                        const Poco::Net::Context::Ptr& tls) {
  auto fail = [](const std::string& why, bool retryable = false) {
    return FetchError(why, retryable);
  };
  auto uri = readableUri(input.url, tls);
  if (!uri) return uri.error();
  try {
    auto client = session(*uri, timeout, tls);
    Poco::Net::HTTPResponse response;
    request(*client, Poco::Net::HTTPRequest::HTTP_HEAD, *uri, signer, response, fail);
    if (input.size > 0 && response.hasContentLength() &&
        static_cast<std::uint64_t>(response.getContentLength64()) != input.size) {
      return Error("it is " + std::to_string(response.getContentLength64()) +
                   " bytes there, expected " + std::to_string(input.size));
    }
    return {};
  } catch (const FetchError& e) {
    return Error(e.what());
  } catch (const Poco::Exception& e) {
    if (tls::isTlsException(e)) return Error("TLS: " + tls::explainFailure(e));
    return Error(e.displayText());
  }
}

void fetchBlock(const protocol::InputBlock& input, const std::filesystem::path& dest,
                const std::atomic<bool>& cancelled, std::chrono::milliseconds timeout,
                const protocol::auth::RequestSigner& signer, const Poco::Net::Context::Ptr& tls) {
  const std::string where = "block " + input.id + " from " + input.url;
  auto fail = [&](const std::string& why, bool retryable = false) {
    return FetchError(where + ": " + why, retryable);
  };
  std::filesystem::path part = dest;
  part += ".part";
  try {
    auto uri = readableUri(input.url, tls);
    if (!uri) throw fail(uri.error().message);
    auto client = session(*uri, timeout, tls);
    Poco::Net::HTTPResponse response;
    std::istream& in =
        request(*client, Poco::Net::HTTPRequest::HTTP_GET, *uri, signer, response, fail);
    std::ofstream out(part, std::ios::binary | std::ios::trunc);
    if (!out) throw fail("cannot create " + part.string());
    Xxh64 hash;
    std::uint64_t size = 0;
    std::vector<char> buffer(1 << 20);
    while (in) {
      if (cancelled) {
        out.close();
        std::filesystem::remove(part);
        throw fail("cancelled");
      }
      in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
      std::streamsize n = in.gcount();
      if (n <= 0) break;
      hash.update(buffer.data(), static_cast<std::size_t>(n));
      out.write(buffer.data(), n);
      size += static_cast<std::uint64_t>(n);
    }
    out.close();
    if (!out) throw fail("cannot write " + part.string());
    if (input.size > 0 && size != input.size) {
      // Fewer: the connection ended early (the server went away mid-block).
      throw fail("got " + std::to_string(size) + " bytes, expected " + std::to_string(input.size),
                 /*retryable=*/size < input.size);
    }
    if (!input.checksum.empty() && hash.text() != input.checksum) {
      throw fail("checksum mismatch: expected " + input.checksum + ", got " + hash.text());
    }
    std::filesystem::rename(part, dest);
  } catch (const FetchError&) {
    std::error_code ec;
    std::filesystem::remove(part, ec);
    throw;
  } catch (const Poco::Exception& e) {
    std::error_code ec;
    std::filesystem::remove(part, ec);
    if (tls::isTlsException(e)) throw fail("TLS: " + tls::explainFailure(e));
    // Refused, reset, timed out, host unreachable: the server may be back in a moment.
    const bool network = dynamic_cast<const Poco::Net::NetException*>(&e) != nullptr ||
                         dynamic_cast<const Poco::TimeoutException*>(&e) != nullptr ||
                         dynamic_cast<const Poco::IOException*>(&e) != nullptr;
    throw fail(e.displayText(), network);
  } catch (const std::exception& e) {
    std::error_code ec;
    std::filesystem::remove(part, ec);
    throw fail(e.what());
  }
}

void fetchBlockRetrying(const protocol::InputBlock& input, const std::filesystem::path& dest,
                        const std::atomic<bool>& cancelled, std::chrono::milliseconds timeout,
                        std::chrono::milliseconds window,
                        const protocol::auth::RequestSigner& signer,
                        const Poco::Net::Context::Ptr& tls) {
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + window;
  std::chrono::milliseconds wait(100);
  for (;;) {
    try {
      fetchBlock(input, dest, cancelled, timeout, signer, tls);
      return;
    } catch (const FetchError& e) {
      if (!e.retryable() || cancelled || Clock::now() + wait > deadline) throw;
    }
    const auto until = Clock::now() + wait;
    while (!cancelled && Clock::now() < until) {
      std::this_thread::sleep_for(
          std::min<Clock::duration>(until - Clock::now(), std::chrono::milliseconds(20)));
    }
    wait = std::min(wait * 2, std::chrono::milliseconds(2000));
  }
}

}  // namespace dockhand::agent
