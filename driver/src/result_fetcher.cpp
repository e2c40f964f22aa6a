#include "dockhand/driver/result_fetcher.h"

#include <xxhash.h>

#include <memory>

#include <Poco/Exception.h>
#include <Poco/Net/HTTPClientSession.h>
#include <Poco/Net/HTTPRequest.h>
#include <Poco/Net/HTTPResponse.h>
#include <Poco/URI.h>
#include <fmt/format.h>

#include "dockhand/base/logging.h"
#include "dockhand/base/thread_name.h"
#include "dockhand/checksum.hpp"
#include "dockhand/tls/tls.h"

namespace dockhand::driver {
std::string blockChecksum(std::string_view bytes) {
  return sdk::formatChecksum(XXH64(bytes.data(), bytes.size(), 0));
}

std::unique_ptr<Poco::Net::HTTPClientSession> clientSession(const std::string& host,
                                                            std::uint16_t port,
                                                            const Poco::Net::Context::Ptr& tls,
                                                            std::chrono::milliseconds timeout) {
  std::unique_ptr<Poco::Net::HTTPClientSession> session = tls::newClientSession(host, port, tls);
  const auto ms = timeout.count();
  session->setTimeout(
      Poco::Timespan(static_cast<long>(ms / 1000), static_cast<long>((ms % 1000) * 1000)));
  return session;
}

namespace {

ResultFetchError fetchError(const ResultBlock& block, const std::string& why) {
  return ResultFetchError(fmt::format("result block {} from {}: {}", block.id, block.url, why));
}

// Sends `method` for the block's URL (signed, over TLS as the options say) and returns the
// session, from which the caller reads the response.
std::unique_ptr<Poco::Net::HTTPClientSession> sendBlockRequest(const ResultBlock& block,
                                                               const ResultFetchOptions& options,
                                                               const std::string& method) {
  Poco::URI uri(block.url);
  const std::string scheme = options.tls ? "https" : "http";
  if (uri.getScheme() != scheme || uri.getHost().empty()) {
    throw fetchError(block, fmt::format("expected an {}://HOST:PORT/blocks/<id> URL{}", scheme,
                                        options.tls ? " (this driver uses TLS)" : ""));
  }
  auto session = clientSession(uri.getHost(), uri.getPort(), options.tls, options.timeout);
  Poco::Net::HTTPRequest request(method, uri.getPathEtc(), Poco::Net::HTTPMessage::HTTP_1_1);
  if (options.signer) {
    std::string header = options.signer(method, uri.getPath(), "");
    if (!header.empty()) request.set("Authorization", header);
  }
  session->sendRequest(request);
  return session;
}

// The start of an error answer's body, on one line.
std::string errorBody(std::istream& in) {
  std::string body(512, '\0');
  in.read(body.data(), static_cast<std::streamsize>(body.size()));
  body.resize(static_cast<std::size_t>(in.gcount()));
  while (!body.empty() && (body.back() == '\n' || body.back() == '\r')) body.pop_back();
  return body;
}

}  // namespace

std::string fetchResultBlock(const ResultBlock& block, const ResultFetchOptions& options) {
  auto fail = [&](const std::string& why) { return fetchError(block, why); };
  if (block.size > options.max_bytes) {
    throw fail(fmt::format("{} bytes is more than the driver takes (max_result_bytes {})",
                           block.size, options.max_bytes));
  }
  try {
    auto session = sendBlockRequest(block, options, Poco::Net::HTTPRequest::HTTP_GET);
    Poco::Net::HTTPResponse response;
    std::istream& in = session->receiveResponse(response);
    if (response.getStatus() != Poco::Net::HTTPResponse::HTTP_OK) {
      const std::string body = errorBody(in);
      throw fail(fmt::format("HTTP {} {}{}", static_cast<int>(response.getStatus()),
                             response.getReason(), body.empty() ? "" : ": " + body));
    }
    std::string bytes;
    bytes.reserve(static_cast<std::size_t>(block.size));
    std::string buffer(std::size_t{1} << 16, '\0');
    while (in) {
      in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
      const auto n = static_cast<std::size_t>(in.gcount());
      if (n == 0) break;
      if (bytes.size() + n > options.max_bytes) {
        throw fail(fmt::format("more than {} bytes (max_result_bytes)", options.max_bytes));
      }
      bytes.append(buffer.data(), n);
    }
    if (bytes.size() != block.size) {
      throw fail(fmt::format("got {} bytes, expected {}", bytes.size(), block.size));
    }
    if (!block.checksum.empty()) {
      const std::string got = blockChecksum(bytes);
      if (got != block.checksum) {
        throw fail(fmt::format("checksum mismatch: expected {}, got {}", block.checksum, got));
      }
    }
    return bytes;
  } catch (const ResultFetchError&) {
    throw;
  } catch (const Poco::Exception& e) {
    throw fail(tls::isTlsException(e) ? "TLS: " + tls::explainFailure(e) : e.displayText());
  } catch (const std::exception& e) {
    throw fail(e.what());
  }
}

void removeResultBlock(const ResultBlock& block, const ResultFetchOptions& options) {
  try {
    auto session = sendBlockRequest(block, options, Poco::Net::HTTPRequest::HTTP_DELETE);
    Poco::Net::HTTPResponse response;
    std::istream& in = session->receiveResponse(response);
    const auto status = response.getStatus();
    // 404: already gone (removed by an earlier request, or migrated away): nothing to do.
    if (status != Poco::Net::HTTPResponse::HTTP_NO_CONTENT &&
        status != Poco::Net::HTTPResponse::HTTP_NOT_FOUND) {
      const std::string body = errorBody(in);
      throw fetchError(block, fmt::format("DELETE: HTTP {} {}{}", static_cast<int>(status),
                                          response.getReason(), body.empty() ? "" : ": " + body));
    }
  } catch (const ResultFetchError&) {
    throw;
  } catch (const Poco::Exception& e) {
    throw fetchError(block, tls::isTlsException(e) ? "DELETE: TLS: " + tls::explainFailure(e)
                                                   : "DELETE: " + e.displayText());
  } catch (const std::exception& e) {
    throw fetchError(block, std::string("DELETE: ") + e.what());
  }
}

// ---- ResultFetcher ----------------------------------------------------------------------------

ResultFetcher::ResultFetcher(ResultFetchOptions options) : options_(std::move(options)) {
  if (options_.threads == 0) options_.threads = 1;
}

ResultFetcher::~ResultFetcher() { stop(); }

void ResultFetcher::fetch(ResultBlock block, Done done) {
  std::lock_guard lock(mutex_);
  if (stopping_) return;
  queue_.push_back(Request{std::move(block), std::move(done)});
  if (threads_.size() < options_.threads) {
    threads_.emplace_back([this] {
      nameThisThread("dhd-fetch");
      work();
    });
  }
  wake_.notify_one();
}

void ResultFetcher::stop() {
  std::vector<std::thread> threads;
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    queue_.clear();
    threads.swap(threads_);
  }
  wake_.notify_all();
  for (auto& t : threads) t.join();
}

void ResultFetcher::work() {
  for (;;) {
    Request request;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (stopping_) return;
      request = std::move(queue_.front());
      queue_.pop_front();
    }
    const Result<std::string> bytes = [&]() -> Result<std::string> {
      try {
        return fetchResultBlock(request.block, options_);
      } catch (const std::exception& e) {
        return Error(e.what());
      }
    }();
    if (bytes) {
      // The driver has the bytes: the block is of no more use on the agent (Spark's driver
      // removes an indirect result's block once fetched, too). A failure costs disk space only.
      try {
        removeResultBlock(request.block, options_);
        logger("driver")->debug("result block {} removed from {}", request.block.id,
                                request.block.url);
      } catch (const std::exception& e) {
        logger("driver")->warn("{} (the block stays on the agent)", e.what());
      }
    }
    try {
      request.done(bytes);
    } catch (...) {  // NOLINT(bugprone-empty-catch): the owner's callback handles its own
      // errors; one that escapes must not end the driver.
    }
  }
}

}  // namespace dockhand::driver
