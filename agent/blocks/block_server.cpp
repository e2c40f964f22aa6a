#include "blocks/block_server.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <stdexcept>
#include <vector>

#include <Poco/Net/HTTPRequestHandler.h>
#include <Poco/Net/HTTPRequestHandlerFactory.h>
#include <Poco/Net/HTTPServer.h>
#include <Poco/Net/HTTPServerParams.h>
#include <Poco/Net/HTTPServerRequest.h>
#include <Poco/Net/HTTPServerRequestImpl.h>
#include <Poco/Net/HTTPServerResponse.h>
#include <Poco/Net/HTTPServerSession.h>
#include <Poco/Net/ServerSocket.h>

#include "blocks/block_id.h"
#include "blocks/block_request.h"
#include "blocks/checksum.h"
#include "dockhand/base/logging.h"
#include "dockhand/base/unique_fd.h"
#include "dockhand/metrics/metrics.h"
#include "dockhand/tls/http_server.h"
#include "dockhand/tls/tls.h"

namespace dockhand::agent {
namespace {

using Poco::Net::HTTPRequest;
using Poco::Net::HTTPResponse;
using Poco::Net::HTTPServerRequest;
using Poco::Net::HTTPServerResponse;

constexpr std::size_t kChunk = 1 << 20;
constexpr char kChecksumHeader[] = "X-Dockhand-Checksum";

std::shared_ptr<spdlog::logger> log() { return logger("blocks"); }

void sendText(HTTPServerResponse& response, HTTPResponse::HTTPStatus status,
              const std::string& text) {
  response.setStatusAndReason(status);  // "507 Insufficient Storage", not "507 OK"
  response.setContentType("text/plain; charset=utf-8");
  std::string body = text + "\n";
  response.setContentLength(static_cast<std::streamsize>(body.size()));
  response.send() << body << std::flush;
}

// HTTPSession::read (protected) hands out what the session buffered, then reads the socket
// straight into the caller's buffer. Naming it through a derived class is the language's way to
// reach it from outside; the pointer it yields is called on the server's own session object.
struct SessionAccess : Poco::Net::HTTPSession {
  static constexpr auto kRead = &SessionAccess::read;
};
constexpr int (Poco::Net::HTTPSession::*kSessionRead)(char*,
                                                      std::streamsize) = SessionAccess::kRead;

class BlockHandler : public Poco::Net::HTTPRequestHandler {
 public:
  explicit BlockHandler(BlockServer& server) : server_(server) {}

  void handleRequest(HTTPServerRequest& request, HTTPServerResponse& response) override {
    // A body that is not read to its end would be parsed as the next request on this
    // connection (a refused PUT could smuggle a request in its body): unless a handler reads
    // the whole body and says so, the connection closes after the answer.
    const bool has_body = (request.hasContentLength() && request.getContentLength64() > 0) ||
                          request.getChunkedTransferEncoding();
    if (has_body) response.setKeepAlive(false);
    try {
      route(request, response);
      if (has_body && !body_read_) lingerAfterRefusal(request);
    } catch (const std::exception& e) {
      log()->warn("{} {}: {}", request.getMethod(), request.getURI(), e.what());
      if (!response.sent()) {
        sendText(response, HTTPResponse::HTTP_INTERNAL_SERVER_ERROR, e.what());
      }
    }
  }

 private:
  void route(HTTPServerRequest& request, HTTPServerResponse& response) {
    const RoutedRequest routed = routeBlockRequest(request.getURI());
    const std::string& method = request.getMethod();
    const std::string& id = routed.id;
    switch (routed.route) {
      case BlockRoute::kHealth:
        if (method != HTTPRequest::HTTP_GET && method != HTTPRequest::HTTP_HEAD) {
          return notAllowed(response, "GET, HEAD");
        }
        return sendText(response, HTTPResponse::HTTP_OK, "ok");
      case BlockRoute::kStatus: {
        if (method != HTTPRequest::HTTP_GET) return notAllowed(response, "GET");
        std::string body = server_.status().dump(2) + "\n";
        response.setContentType("application/json");
        response.setContentLength(static_cast<std::streamsize>(body.size()));
        response.send() << body;
        return;
      }
      case BlockRoute::kReady: {
        if (method != HTTPRequest::HTTP_GET && method != HTTPRequest::HTTP_HEAD) {
          return notAllowed(response, "GET, HEAD");
        }
        if (auto why = server_.notReady()) {
          return sendText(response, HTTPResponse::HTTP_SERVICE_UNAVAILABLE, "not ready: " + *why);
        }
        return sendText(response, HTTPResponse::HTTP_OK, "ready");
      }
      case BlockRoute::kMetrics: {
        if (method != HTTPRequest::HTTP_GET) return notAllowed(response, "GET");
        if (!server_.hasMetrics()) {
          return sendText(response, HTTPResponse::HTTP_NOT_FOUND, "this server has no metrics");
        }
        std::string body = server_.metrics();
        response.setContentType(metrics::kContentType);
        response.setContentLength(static_cast<std::streamsize>(body.size()));
        response.send() << body;
        return;
      }
      case BlockRoute::kAgentLog:
      case BlockRoute::kTaskLog:
      case BlockRoute::kBadLogPath:
        if (!authorized(request, response, routed.path)) return;
        if (method != HTTPRequest::HTTP_GET && method != HTTPRequest::HTTP_HEAD) {
          return notAllowed(response, "GET, HEAD");
        }
        if (routed.route == BlockRoute::kBadLogPath) {
          return sendText(response, HTTPResponse::HTTP_BAD_REQUEST, routed.error);
        }
        return getLog(request, response, routed);
      case BlockRoute::kNotFound:
        return sendText(response, HTTPResponse::HTTP_NOT_FOUND,
                        "no such resource: " + routed.path +
                            " (try /blocks/<id>, /healthz, /readyz, /v1/status, /metrics, "
                            "/v1/logs/agent/<stream>, /v1/tasks/<id>/logs/<stream>)");
      case BlockRoute::kInvalidId:
        if (!authorized(request, response, routed.path)) return;
        return sendText(
            response, HTTPResponse::HTTP_BAD_REQUEST,
            "invalid block id '" + id + "' (expected " + std::string(kBlockIdForms) + ")");
      case BlockRoute::kBlock:
        if (!authorized(request, response, routed.path)) return;
        break;
    }
    if (method == HTTPRequest::HTTP_GET || method == HTTPRequest::HTTP_HEAD) {
      return get(request, response, id);
    }
    if (method == HTTPRequest::HTTP_PUT) return put(request, response, id);
    if (method == HTTPRequest::HTTP_DELETE) return remove(response, id);
    notAllowed(response, "GET, HEAD, PUT, DELETE");
  }

  // True when no signature is needed or the request's is valid; otherwise answers 401.
  bool authorized(HTTPServerRequest& request, HTTPServerResponse& response,
                  const std::string& path) {
    const auto& verifier = server_.options().verifier;
    if (!verifier) return true;
    const std::string& method = request.getMethod();
    const std::string content =
        method == HTTPRequest::HTTP_PUT ? request.get(kChecksumHeader, "") : std::string();
    auto verdict = verifier->verify(
        request.get("Authorization", ""),
        protocol::auth::RequestToSign{.method = method, .path = path, .content = content},
        protocol::auth::wallClockMs());
    if (verdict) return true;
    const std::string& why = verdict.error().message;
    server_.countAuthRefusal();
    log()->warn("refused {} {} from {}: {}", method, path, request.clientAddress().toString(), why);
    response.set("WWW-Authenticate", std::string(protocol::auth::kHeaderScheme));
    sendText(response, HTTPResponse::HTTP_UNAUTHORIZED, "unauthorized: " + why);
    return false;
  }

  static void notAllowed(HTTPServerResponse& response, const std::string& allowed) {
    response.set("Allow", allowed);
    sendText(response, HTTPResponse::HTTP_METHOD_NOT_ALLOWED, "method not allowed; use " + allowed);
  }

  // DELETE: the block leaves this agent's store at once; its space is given back on the store's
  // thread. The driver asks this of a result block once it has the bytes. The fallback store is
  // not touched: it is shared by the agents and outlives each of them.
  void remove(HTTPServerResponse& response, const std::string& id) {
    if (!server_.store().removeLater(id)) {
      return sendText(response, HTTPResponse::HTTP_NOT_FOUND, "block " + id + " is not here");
    }
    log()->debug("block {} removed on request", id);
    response.setStatus(HTTPResponse::HTTP_NO_CONTENT);
    response.setContentLength(0);
    response.send();
  }

  void get(HTTPServerRequest& request, HTTPServerResponse& response, const std::string& id) {
    std::filesystem::path file;
    std::string checksum;
    if (auto meta = server_.store().find(id)) {
      file = server_.store().pathOf(id);
      checksum = meta->checksum;
    } else if (!server_.options().fallback_dir.empty()) {
      std::error_code ec;
      std::filesystem::path candidate = server_.options().fallback_dir / id;
      if (std::filesystem::is_regular_file(candidate, ec)) file = candidate;
    }
    if (file.empty()) {
      return sendText(response, HTTPResponse::HTTP_NOT_FOUND, "block " + id + " is not here");
    }
    const UniqueFd opened(::open(file.c_str(), O_RDONLY | O_CLOEXEC));
    const int fd = opened.get();
    if (fd < 0) {
      // Removed (migrated) between the lookup and the open.
      return sendText(response, HTTPResponse::HTTP_NOT_FOUND, "block " + id + " is not here");
    }
    const auto size = static_cast<std::uint64_t>(::lseek(fd, 0, SEEK_END));
    std::uint64_t first = 0;
    std::uint64_t count = size;
    response.set("Accept-Ranges", "bytes");
    if (!checksum.empty()) response.set(kChecksumHeader, checksum);
    if (request.has("Range")) {
      if (auto range = parseRange(request.get("Range"), size)) {
        if (!range->satisfiable) {
          response.set("Content-Range", "bytes */" + std::to_string(size));
          return sendText(
              response, HTTPResponse::HTTP_REQUESTED_RANGE_NOT_SATISFIABLE,
              "range not satisfiable for block " + id + " of " + std::to_string(size) + " bytes");
        }
        first = range->first;
        count = range->last - range->first + 1;
        response.setStatus(HTTPResponse::HTTP_PARTIAL_CONTENT);
        response.set("Content-Range", "bytes " + std::to_string(range->first) + "-" +
                                          std::to_string(range->last) + "/" + std::to_string(size));
      }
    }
    response.setContentType("application/octet-stream");
    response.setContentLength64(static_cast<Poco::Int64>(count));
    std::ostream& out = response.send();
    if (request.getMethod() == HTTPRequest::HTTP_HEAD) return;
    std::vector<char> buffer(kChunk);
    std::uint64_t offset = first;
    std::uint64_t left = count;
    while (left > 0 && out) {
      ssize_t n = ::pread(fd, buffer.data(), std::min<std::uint64_t>(left, buffer.size()),
                          static_cast<off_t>(offset));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;  // the length header is then wrong: the client sees a short body
      out.write(buffer.data(), n);
      offset += static_cast<std::uint64_t>(n);
      left -= static_cast<std::uint64_t>(n);
    }
  }

  void getLog(HTTPServerRequest& request, HTTPServerResponse& response,
              const RoutedRequest& routed) {
    const bool task = routed.route == BlockRoute::kTaskLog;
    LogFile file = server_.openLog(task, routed.task_id, routed.stream);
    if (file.fd < 0 && file.status != 200) {
      const int status = file.status >= 400 && file.status < 600 ? file.status : 404;
      return sendText(response, static_cast<HTTPResponse::HTTPStatus>(status), file.reason);
    }
    const UniqueFd closer(file.fd);
    std::uint64_t size = 0;  // an empty log when there is no file
    if (file.fd >= 0) {
      struct stat st {};
      if (::fstat(file.fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        return sendText(response, HTTPResponse::HTTP_NOT_FOUND, "the log is not a regular file");
      }
      size = file.size.value_or(static_cast<std::uint64_t>(st.st_size));
    }
    std::optional<std::string_view> range_header;
    std::string range_value;
    if (request.has("Range")) {
      range_value = request.get("Range");
      range_header = range_value;
    }
    const LogWindow window = parseLogWindow(routed.query, range_header, size);
    response.set("Accept-Ranges", "bytes");
    response.set("X-Dockhand-Log-Size", std::to_string(size));
    response.set("X-Content-Type-Options", "nosniff");
    response.set("Cache-Control", "no-store");
    switch (window.kind) {
      case LogWindow::Kind::kBad:
        return sendText(response, HTTPResponse::HTTP_BAD_REQUEST, window.error);
      case LogWindow::Kind::kUnsatisfiable:
        response.set("Content-Range", "bytes */" + std::to_string(size));
        return sendText(response, HTTPResponse::HTTP_REQUESTED_RANGE_NOT_SATISFIABLE, window.error);
      case LogWindow::Kind::kRange:
        response.setStatus(HTTPResponse::HTTP_PARTIAL_CONTENT);
        response.set("Content-Range", "bytes " + std::to_string(window.first) + "-" +
                                          std::to_string(window.first + window.count - 1) + "/" +
                                          std::to_string(size));
        break;
      case LogWindow::Kind::kQuery:
      case LogWindow::Kind::kWhole:
        break;
    }
    response.setContentType("text/plain; charset=utf-8");
    response.setContentLength64(static_cast<Poco::Int64>(window.count));
    std::ostream& out = response.send();
    if (request.getMethod() == HTTPRequest::HTTP_HEAD) return;
    streamFile(out, file.fd, window.first, window.count);
  }

  // Writes `count` bytes of `fd` from `offset` to `out`, in 1 MiB pieces at most. A file that
  // shrank meanwhile leaves the body short (the client sees the length does not match).
  static void streamFile(std::ostream& out, int fd, std::uint64_t offset, std::uint64_t count) {
    std::vector<char> buffer(std::min<std::uint64_t>(std::max<std::uint64_t>(count, 1), kChunk));
    std::uint64_t left = count;
    while (left > 0 && out) {
      ssize_t n = ::pread(fd, buffer.data(), std::min<std::uint64_t>(left, buffer.size()),
                          static_cast<off_t>(offset));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      out.write(buffer.data(), n);
      offset += static_cast<std::uint64_t>(n);
      left -= static_cast<std::uint64_t>(n);
    }
  }

  void put(HTTPServerRequest& request, HTTPServerResponse& response, const std::string& id) {
    struct Admitted {
      std::shared_ptr<std::atomic<std::size_t>> count;
      ~Admitted() {
        if (count) --*count;
      }
    } admitted{server_.admitWrite()};
    if (!admitted.count) {
      return sendText(
          response, HTTPResponse::HTTP_SERVICE_UNAVAILABLE,
          "this agent is decommissioning and takes no new blocks; push " + id + " to another peer");
    }
    if (!request.has(kChecksumHeader) || !parseChecksum(request.get(kChecksumHeader))) {
      return sendText(response, HTTPResponse::HTTP_BAD_REQUEST,
                      std::string("PUT needs header ") + kChecksumHeader + ": xxh64:<16 hex>");
    }
    const std::string expected = request.get(kChecksumHeader);
    const bool has_length = request.hasContentLength();
    const auto length = has_length ? static_cast<std::uint64_t>(request.getContentLength64()) : 0;
    if (has_length) {
      struct statvfs fs {};
      if (::statvfs(server_.store().dir().c_str(), &fs) == 0 &&
          static_cast<std::uint64_t>(fs.f_bavail) * fs.f_frsize < length) {
        return sendText(
            response, HTTPResponse::HTTP_INSUFFICIENT_STORAGE,
            "not enough disk space for block " + id + " (" + std::to_string(length) + " bytes)");
      }
    }
    std::unique_ptr<BlockStore::Writer> writer;
    try {
      writer = server_.store().create(id);
      AlignedBuffer buffer(kChunk);
      auto* direct =
          has_length ? dynamic_cast<Poco::Net::HTTPServerRequestImpl*>(&request) : nullptr;
      if (direct != nullptr) {
        // The request stream reads 4 KiB per call; a block body is read from the session
        // (what it buffered with the header comes first) into an aligned 1 MiB buffer, which
        // goes to the store only when full, so that the store can hand it to the disk without
        // a copy. Exactly Content-Length bytes are consumed: a kept-alive connection stays in
        // step.
        Poco::Net::HTTPServerSession& session = direct->session();
        std::uint64_t left = length;
        std::size_t filled = 0;
        while (left > 0) {
          const auto want = std::min<std::uint64_t>(left, buffer.size() - filled);
          int n =
              (session.*kSessionRead)(buffer.data() + filled, static_cast<std::streamsize>(want));
          if (n <= 0) break;
          filled += static_cast<std::size_t>(n);
          left -= static_cast<std::uint64_t>(n);
          if (filled == buffer.size()) {
            writer->write(buffer.data(), filled);
            filled = 0;
          }
        }
        if (filled > 0) writer->write(buffer.data(), filled);
      } else {
        std::istream& in = request.stream();
        while (in) {
          in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
          std::streamsize n = in.gcount();
          if (n <= 0) break;
          writer->write(buffer.data(), static_cast<std::size_t>(n));
        }
      }
      if (has_length && writer->written() != length) {
        // The sender went away mid-body: nothing is committed.
        const std::uint64_t got = writer->written();
        writer.reset();  // the partial file goes before the answer does
        log()->warn("PUT {}: body ended after {} of {} bytes; discarded", id, got, length);
        return sendText(response, HTTPResponse::HTTP_BAD_REQUEST,
                        "block " + id + ": body ended after " + std::to_string(got) + " of " +
                            std::to_string(length) + " bytes");
      }
      BlockMeta meta = writer->commit(expected);
      log()->debug("stored block {} ({} bytes) from {}", id, meta.size,
                   request.clientAddress().toString());
      std::string body =
          nlohmann::json{{"id", meta.id}, {"size", meta.size}, {"checksum", meta.checksum}}.dump() +
          "\n";
      body_read_ = true;
      response.setKeepAlive(request.getKeepAlive());  // the body was read to its end
      response.setStatus(HTTPResponse::HTTP_CREATED);
      response.setContentType("application/json");
      response.setContentLength(static_cast<std::streamsize>(body.size()));
      response.send() << body;
    } catch (const BlockStoreError& e) {
      writer.reset();  // the partial file goes before the answer does
      using Kind = BlockStoreError::Kind;
      switch (e.kind()) {
        case Kind::kDiskFull:
          return sendText(response, HTTPResponse::HTTP_INSUFFICIENT_STORAGE, e.what());
        case Kind::kChecksumMismatch:
        case Kind::kInvalidId:
          return sendText(response, HTTPResponse::HTTP_BAD_REQUEST, e.what());
        case Kind::kConflict:
          return sendText(response, HTTPResponse::HTTP_CONFLICT, e.what());
        case Kind::kIo:
          break;
      }
      log()->warn("PUT {}: {}", id, e.what());
      return sendText(response, HTTPResponse::HTTP_INTERNAL_SERVER_ERROR, e.what());
    }
  }

  // The answer to a request whose body was not read (a refused PUT) is out; the sender is
  // probably still sending. Closing now would reset the connection and could destroy the
  // answer at the sender before it reads it, so: end our side, then read and drop what still
  // comes for a short, bounded time, as web servers do before they close.
  static void lingerAfterRefusal(HTTPServerRequest& request) {
    auto* impl = dynamic_cast<Poco::Net::HTTPServerRequestImpl*>(&request);
    if (impl == nullptr) return;
    try {
      Poco::Net::StreamSocket& socket = impl->socket();
      // Over TLS ending our side ends the TLS session (and the socket) at once: only read.
      if (!socket.secure()) socket.shutdownSend();
      socket.setReceiveTimeout(Poco::Timespan(0, 200L * 1000));
      const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
      std::vector<char> sink(kChunk);
      while (std::chrono::steady_clock::now() < until) {
        int n =
            (impl->session().*kSessionRead)(sink.data(), static_cast<std::streamsize>(sink.size()));
        if (n <= 0) break;
      }
    } catch (const Poco::Exception&) {
      // timed out or reset: the connection closes either way
    }
  }

  BlockServer& server_;
  bool body_read_ = false;
};

class HandlerFactory : public Poco::Net::HTTPRequestHandlerFactory {
 public:
  explicit HandlerFactory(BlockServer& server) : server_(server) {}
  Poco::Net::HTTPRequestHandler* createRequestHandler(const HTTPServerRequest&) override {
    return new BlockHandler(server_);
  }

 private:
  BlockServer& server_;
};

}  // namespace

BlockServer::BlockServer(BlockServerOptions options, BlockStore& store, StatusProvider status,
                         MetricsProvider metrics, ReadinessProvider readiness, LogProvider logs)
    : options_(std::move(options)),
      store_(store),
      status_(std::move(status)),
      metrics_(std::move(metrics)),
      readiness_(std::move(readiness)),
      logs_(std::move(logs)),
      auth_refusals_counter_(
          metrics::registryOr(options_.metrics, own_metrics_)
              .counter("dockhand_auth_failures_total",
                       "Requests and handshakes refused for authentication, by where.", {"where"})
              .labels({"block_server"})) {}

BlockServer::~BlockServer() { stop(); }

void BlockServer::countAuthRefusal() {
  ++auth_refusals_;
  auth_refusals_counter_.inc();
}

void BlockServer::start() {
  if (server_) return;
  try {
    const Poco::Net::SocketAddress address(options_.bind_address,
                                           static_cast<Poco::UInt16>(options_.port));
    Poco::Net::ServerSocket socket = tls::newServerSocket(address, 128);
    port_ = socket.address().port();
    auto* params = new Poco::Net::HTTPServerParams;
    params->setMaxThreads(options_.max_threads);
    params->setMaxQueued(options_.max_queued);
    params->setKeepAlive(true);
    params->setTimeout(Poco::Timespan(60, 0));
    server_ = std::make_unique<tls::HttpServer>(
        new HandlerFactory(*this), nullptr, socket, params, options_.tls,
        [](const std::string& peer, const std::string& why) {
          log()->warn("refused a connection from {}: TLS handshake failed: {}", peer, why);
        });
    server_->start();
  } catch (const Poco::Exception& e) {
    server_.reset();
    throw std::runtime_error("block server: cannot listen on " + options_.bind_address + ":" +
                             std::to_string(options_.port) + ": " + e.displayText());
  }
  log()->info("block server listening on {}:{} ({})", options_.bind_address, port_,
              options_.tls ? "https" : "http");
}

void BlockServer::stop() {
  if (!server_) return;
  server_->stopAll(true);
  server_.reset();
}

}  // namespace dockhand::agent
