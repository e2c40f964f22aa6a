// ResultFetcher: brings the driver the results that agents stored as blocks.
//
// A library task whose result is too large for a status update finishes with
// {"block": "task_<id>_result", "bytes": N, ...}: its agent stored the bytes as a block and
// reported it (UpdateBlockInfo) before FINISHED. The DriverService hands each such result to
// a ResultFetcher, which GETs the block from the agent's block server (signed when the cluster
// has a secret, over TLS when it has TLS), checks its size and xxh64 checksum, DELETEs the
// block on the agent once it has the bytes, and calls back with the bytes or with why it could
// not.
//
// Threads: fetch() only queues; a few fetch threads, started at the first fetch, run the
// requests in order and call `done` on their own thread (never under the caller's locks), so
// a slow agent holds up no connection thread. Every fetch is bounded by the timeout.
// Lifetime: stop() (or the destructor) drops what is still queued, without calling it back,
// and waits for the fetches under way, whose callbacks still run; nothing runs after it.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <Poco/Net/Context.h>
#include <Poco/Net/HTTPClientSession.h>

#include "dockhand/base/result.h"
#include "dockhand/protocol/auth.h"
#include "dockhand/protocol/envelope.h"

namespace dockhand::driver {

// Where a result block is and what it must be.
struct ResultBlock {
  std::string id;
  std::string url;  // http(s)://HOST:PORT/blocks/<id>
  std::uint64_t size = 0;
  std::string checksum;  // "xxh64:<16 hex>"; empty: not checked
};

struct ResultFetchOptions {
  std::chrono::milliseconds timeout{30000};  // per network operation of one fetch
  std::uint64_t max_bytes = std::uint64_t{1} << 30;
  std::size_t threads = 2;
  protocol::auth::RequestSigner signer;  // empty: unsigned requests
  Poco::Net::Context::Ptr tls;           // set: the URL must be https://
};

class ResultFetchError : public std::runtime_error {
 public:
  explicit ResultFetchError(const std::string& what) : std::runtime_error(what) {}
};

// GETs the block into memory and checks its size and checksum. Blocking. Throws
// ResultFetchError "result block <id> from <url>: <why>".
std::string fetchResultBlock(const ResultBlock& block, const ResultFetchOptions& options);

// A client session to host:port: https:// with `tls` when it is set, else plain http://; every
// network operation bounded by `timeout`. (The driver's commands use it too.)
std::unique_ptr<Poco::Net::HTTPClientSession> clientSession(const std::string& host,
                                                            std::uint16_t port,
                                                            const Poco::Net::Context::Ptr& tls,
                                                            std::chrono::milliseconds timeout);

// DELETEs the block on its agent once its bytes are had (an agent that no longer has it is
// fine). Blocking. Throws ResultFetchError "result block <id> from <url>: DELETE: <why>".
void removeResultBlock(const ResultBlock& block, const ResultFetchOptions& options);

// A block's checksum as the agents write it: "xxh64:<16 lower-case hex digits>".
std::string blockChecksum(std::string_view bytes);

class ResultFetcher {
 public:
  // The block's bytes, or why not.
  using Done = std::function<void(const Result<std::string>& bytes)>;

  explicit ResultFetcher(ResultFetchOptions options);
  ~ResultFetcher();
  ResultFetcher(const ResultFetcher&) = delete;
  ResultFetcher& operator=(const ResultFetcher&) = delete;

  // Queues a fetch; `done` is called on a fetch thread. Ignored after stop().
  void fetch(ResultBlock block, Done done);
  // Drops queued fetches and waits for those under way. Idempotent.
  void stop();

 private:
  struct Request {
    ResultBlock block;
    Done done;
  };
  void work();

  ResultFetchOptions options_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Request> queue_;
  std::vector<std::thread> threads_;
  bool stopping_ = false;
};

}  // namespace dockhand::driver
