// BlockServer: the agent's HTTP endpoint for blocks (Poco HTTPServer, a bounded thread pool).
//
//   GET  /blocks/<id>   the block's bytes (Range: bytes=a-b, a- or -n answered with 206);
//                       when the block is not held here and a fallback directory is set, the
//                       copy in that directory. Headers: Content-Length, X-Dockhand-Checksum.
//   HEAD /blocks/<id>   the same headers, no body.
//   PUT  /blocks/<id>   stores a block a peer pushes (decommission migration). The body streams
//                       to a temporary file; the X-Dockhand-Checksum header (required) is
//                       checked over what arrived, then the file is fsynced and renamed into
//                       the store. 201 with {"id", "size", "checksum"} once it is durable.
//                       503 while this agent decommissions, 507 when the disk is full, 400 for
//                       a checksum or length mismatch, 409 when the id is held with other bytes.
//   GET  /healthz       "ok": the process is up and serving.
//   GET  /readyz        200 "ready" when the readiness provider says so (or there is none), else
//                       503 "not ready: <why>" (starting, decommissioning, stopping, ...).
//   GET  /v1/status     JSON from the status provider (agent state, tasks, blocks,
//                       decommission progress).
//   GET  /metrics       the metrics provider's Prometheus text (format 0.0.4); 404 without one.
//   GET  /v1/logs/agent/<stream>
//   GET  /v1/tasks/<task id>/logs/<stream>
//                       a log (the agent's own stdout/stderr, a task's stdout/stderr) as the
//                       log provider finds it, whole or in part: ?start=N&length=M, or a Range
//                       header answered 206 (parseLogWindow). Header X-Dockhand-Log-Size: the
//                       log's whole size at the time. 404 with the provider's reason when there
//                       is no such log (an unknown task, a reclaimed directory, no such
//                       stream), 400 for a malformed path or query, 416 past the end.
//
// With a request verifier (a cluster that authenticates, docs/security.md) every request
// under /blocks/ and every log request must carry a valid `Authorization:
// Dockhand-HMAC-SHA256 ...` header signed with the cluster secret; otherwise it is answered
// 401 with the reason, logged and counted. /healthz, /readyz, /v1/status and /metrics stay
// open (no block data, no task output).
//
// With a TLS context (BlockServerOptions::tls) the same is served over https:// only; a client
// whose handshake fails (a plain http:// request, a certificate the server refuses) is logged
// at warn by the TLS layer and dropped.
//
// An error body is one line of text saying what went wrong. Bodies stream in 1 MiB pieces;
// no block is ever held in memory whole.
//
// Threads: the server's own pool (max_threads, with max_queued connections waiting). The
// status and metrics providers are called on those threads and must be thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include <Poco/Net/Context.h>
#include <nlohmann/json.hpp>

#include "blocks/block_store.h"
#include "dockhand/metrics/metrics.h"
#include "dockhand/protocol/auth.h"

namespace dockhand::tls {
class HttpServer;
}  // namespace dockhand::tls

namespace dockhand::agent {

struct BlockServerOptions {
  std::string bind_address = "127.0.0.1";
  int port = 0;  // 0: an ephemeral port, read back with port()
  int max_threads = 16;
  int max_queued = 64;
  std::filesystem::path fallback_dir;  // empty: no fallback store
  // Set: block requests must be signed with the cluster secret.
  std::shared_ptr<protocol::auth::RequestVerifier> verifier;
  // Set: the server speaks https:// with this server context (docs/security.md).
  Poco::Net::Context::Ptr tls;
  // Where its refusals are counted (dockhand_auth_failures_total{where="block_server"}); null:
  // a registry of its own.
  metrics::Registry* metrics = nullptr;
};

// What a log request gets from the log provider: an open file descriptor to read (the server
// closes it), an empty log, or the status and one-line reason to answer with.
struct LogFile {
  int fd = -1;  // -1 with status 200: an empty log
  int status = 404;
  std::string reason;
  // How much of the file is the log, when the opener knows (a task's file may go on to another
  // task: what comes after is not this log's); its size at the request otherwise.
  std::optional<std::uint64_t> size;

  static LogFile open(int fd, std::optional<std::uint64_t> size = std::nullopt) {
    return LogFile{fd, 200, {}, size};
  }
  static LogFile empty() { return LogFile{-1, 200, {}, std::nullopt}; }
  static LogFile refused(int status, std::string reason) {
    return LogFile{-1, status, std::move(reason), std::nullopt};
  }
};

class BlockServer {
 public:
  using StatusProvider = std::function<nlohmann::json()>;
  using MetricsProvider = std::function<std::string()>;
  // nullopt: ready; otherwise why not.
  using ReadinessProvider = std::function<std::optional<std::string>()>;
  // Opens the log a request names: (kTaskLog, task id, stream) or (kAgentLog, 0, stream).
  using LogProvider =
      std::function<LogFile(bool task, std::uint64_t task_id, const std::string& stream)>;

  BlockServer(BlockServerOptions options, BlockStore& store, StatusProvider status,
              MetricsProvider metrics = {}, ReadinessProvider readiness = {},
              LogProvider logs = {});
  ~BlockServer();
  BlockServer(const BlockServer&) = delete;
  BlockServer& operator=(const BlockServer&) = delete;

  // Binds and starts serving. Throws std::runtime_error naming the address on failure.
  void start();
  void stop();
  int port() const { return port_; }

  // False: PUT is refused with 503 (the agent is decommissioning).
  void setAcceptingWrites(bool accepting) { accepting_writes_ = accepting; }
  bool acceptingWrites() const { return accepting_writes_; }
  // PUTs let in (before setAcceptingWrites(false)) that have not ended. Once writes are off and
  // this is 0, no block can arrive any more.
  std::size_t writesInFlight() const { return writes_in_flight_->load(); }
  // For put(): counts the write in, then checks that writes are taken, in that order, so that a
  // write either sees the refusal or is counted before a decommission pass asks. Null when
  // refused; else the count, to take the write out of (its handler may end after the server).
  std::shared_ptr<std::atomic<std::size_t>> admitWrite() {
    ++*writes_in_flight_;
    if (accepting_writes_) return writes_in_flight_;
    --*writes_in_flight_;
    return nullptr;
  }
  // Block requests refused for a missing or bad signature (401).
  std::uint64_t authRefusals() const { return auth_refusals_.load(); }
  void countAuthRefusal();

  // For the handlers.
  BlockStore& store() { return store_; }
  const BlockServerOptions& options() const { return options_; }
  nlohmann::json status() const { return status_ ? status_() : nlohmann::json::object(); }
  bool hasMetrics() const { return static_cast<bool>(metrics_); }
  std::string metrics() const { return metrics_ ? metrics_() : std::string(); }
  std::optional<std::string> notReady() const { return readiness_ ? readiness_() : std::nullopt; }
  LogFile openLog(bool task, std::uint64_t task_id, const std::string& stream) const {
    if (logs_) return logs_(task, task_id, stream);
    return LogFile::refused(404, "this server serves no logs");
  }

 private:
  BlockServerOptions options_;
  BlockStore& store_;
  StatusProvider status_;
  MetricsProvider metrics_;
  ReadinessProvider readiness_;
  LogProvider logs_;
  std::atomic<bool> accepting_writes_{true};
  std::shared_ptr<std::atomic<std::size_t>> writes_in_flight_ =
      std::make_shared<std::atomic<std::size_t>>(0);
  std::atomic<std::uint64_t> auth_refusals_{0};
  std::unique_ptr<metrics::Registry> own_metrics_;  // options_.metrics unset
  metrics::Counter& auth_refusals_counter_;  // dockhand_auth_failures_total{where="block_server"}
  std::unique_ptr<tls::HttpServer> server_;
  int port_ = 0;
};

}  // namespace dockhand::agent
