// The `peer` block-migration plugin: pushes each block to a peer agent's block server with
// HTTP PUT (the file goes out with sendfile, never whole in memory), several blocks at once,
// and reports a block migrated only once the peer answered 201, which it does after it has
// checked the checksum and made the block durable. Each block tries each peer at most once per
// pass, those with the fewest failures first. A peer that refuses with 503 decommissions too:
// that refusal does not count against the block (SPARK-44126), and the peer gets no more
// blocks this pass. Any other failure (507: disk full, a lost connection, ...) counts, and the
// peer is tried last for the other blocks; a block left after max_failures_per_block counted
// failures, or with no peer left to try, goes to the next plugin.
// In a cluster that authenticates each PUT carries a signature the host makes
// (dh_host.sign_request); a peer that refuses it (401) is a failed try like any other.
// With a `tls` config (the agent passes its own TLS settings, docs/plugins.md) every PUT goes
// to an https:// block server through Poco's HTTPS client, the peer's certificate checked
// against the CA file and its host name; plain http:// peers are then refused, and the body is
// copied through the TLS layer in pieces instead of with sendfile.
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <atomic>
#include <map>
#include <memory>
#include <set>

#include <Poco/Exception.h>
#include <Poco/Net/HTTPRequest.h>
#include <Poco/Net/HTTPResponse.h>

#include "block_transfer.h"
#include "dockhand/tls/tls.h"

namespace dockhand::plugins {
namespace {

using nlohmann::json;

struct PeerConfig {
  int max_concurrent = 4;
  std::uint64_t bandwidth_bytes_per_s = 0;
  int max_failures_per_block = 3;
  int timeout_ms = 30000;
  int retry_delay_ms = 100;
  // Set: PUTs go to https:// block servers with this client context.
  Poco::Net::Context::Ptr tls;
};

// The `tls` member: the client side of the agent's tls section (ca_file, and certificate_file
// with private_key_file for servers that require client certificates; verify_hostname).
Poco::Net::Context::Ptr parseTls(const json& value) {
  std::vector<protocol::JsonPathError> problems;
  tls::TlsConfig config = tls::readTlsConfig(value, "/tls", problems);
  for (const auto& [key, message] : tls::tlsConfigProblems(config, /*serves=*/false)) {
    problems.emplace_back("/tls/" + key, message);
  }
  if (!problems.empty()) {
    throw sdk::Error(DH_INVALID_ARGUMENT,
                     "peer: config: " + problems.front().path() + ": " + problems.front().detail());
  }
  if (!config.enabled) return {};
  try {
    return tls::makeContext(config, tls::Role::kClient);
  } catch (const tls::TlsError& e) {
    throw sdk::Error(DH_INVALID_ARGUMENT, std::string("peer: config: ") + e.what());
  }
}

PeerConfig parseConfig(std::string_view text) {
  json j = json::parse(text.empty() ? std::string_view("{}") : text, nullptr, false);
  if (!j.is_object()) throw sdk::Error(DH_INVALID_ARGUMENT, "peer: config must be an object");
  static const std::set<std::string> kKeys = {"max_concurrent",         "bandwidth_bytes_per_s",
                                              "max_failures_per_block", "timeout_ms",
                                              "retry_delay_ms",         "tls"};
  PeerConfig c;
  for (const auto& [key, value] : j.items()) {
    if (kKeys.count(key) == 0) {
      throw sdk::Error(DH_INVALID_ARGUMENT, "peer: config: unknown key '" + key + "'");
    }
    if (key == "tls") {
      c.tls = parseTls(value);
      continue;
    }
    if (!value.is_number_integer() || value.get<std::int64_t>() < 0) {
      throw sdk::Error(DH_INVALID_ARGUMENT,
                       "peer: config: /" + key + ": expected a non-negative integer");
    }
  }
  c.max_concurrent = std::max(1, j.value("max_concurrent", c.max_concurrent));
  c.bandwidth_bytes_per_s = j.value("bandwidth_bytes_per_s", c.bandwidth_bytes_per_s);
  c.max_failures_per_block = std::max(1, j.value("max_failures_per_block", 3));
  c.timeout_ms = std::max(1, j.value("timeout_ms", c.timeout_ms));
  c.retry_delay_ms = j.value("retry_delay_ms", c.retry_delay_ms);
  return c;
}

// http(s)://HOST:PORT[/prefix] split up.
struct Endpoint {
  bool https = false;
  std::string host;
  std::string port = "80";
  std::string prefix;
};

bool parseUrl(const std::string& url, Endpoint& out) {
  constexpr std::string_view kPlain = "http://";
  constexpr std::string_view kSecure = "https://";
  std::string rest;
  if (url.compare(0, kPlain.size(), kPlain) == 0) {
    rest = url.substr(kPlain.size());
  } else if (url.compare(0, kSecure.size(), kSecure) == 0) {
    rest = url.substr(kSecure.size());
    out.https = true;
    out.port = "443";
  } else {
    return false;
  }
  auto slash = rest.find('/');
  std::string authority = rest.substr(0, slash);
  if (slash != std::string::npos) out.prefix = rest.substr(slash);
  while (!out.prefix.empty() && out.prefix.back() == '/') out.prefix.pop_back();
  auto colon = authority.rfind(':');
  if (colon != std::string::npos && authority.find(']') == std::string::npos) {
    out.host = authority.substr(0, colon);
    out.port = authority.substr(colon + 1);
  } else {
    out.host = authority;
  }
  if (out.host.size() > 2 && out.host.front() == '[')
    out.host = out.host.substr(1, out.host.size() - 2);
  return !out.host.empty() && !out.port.empty();
}

struct PutOutcome {
  bool ok = false;
  int status = 0;  // HTTP status, 0 when no answer came
  std::string message;
};

class Socket {
 public:
  explicit Socket(int fd = -1) : fd_(fd) {}
  ~Socket() {
    if (fd_ >= 0) ::close(fd_);
  }
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  int fd() const { return fd_; }
  void reset(int fd) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }

 private:
  int fd_;
};

bool sendAll(int fd, const char* data, std::size_t size) {
  while (size > 0) {
    ssize_t n = ::send(fd, data, size, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data += n;
    size -= static_cast<std::size_t>(n);
  }
  return true;
}

class PeerMigration : public ConcurrentBlockMigration {
 public:
  // What parseConfig accepts (the agent passes max_concurrent, bandwidth_bytes_per_s,
  // max_failures_per_block and, with TLS on, its tls section), checked by the host before
  // create(). `tls` takes the keys of the agent's tls section (tls/tls.h).
  static constexpr const char* kConfigSchema = R"({
    "type": "object",
    "properties": {
      "max_concurrent": {"type": "integer", "minimum": 0},
      "bandwidth_bytes_per_s": {"type": "integer", "minimum": 0},
      "max_failures_per_block": {"type": "integer", "minimum": 0},
      "timeout_ms": {"type": "integer", "minimum": 0},
      "retry_delay_ms": {"type": "integer", "minimum": 0},
      "tls": {
        "type": "object",
        "properties": {
          "enabled": {"type": "boolean"},
          "ca_file": {"type": "string"},
          "certificate_file": {"type": "string"},
          "private_key_file": {"type": "string"},
          "require_client_certificate": {"type": "boolean"},
          "verify_hostname": {"type": "boolean"}
        },
        "additionalProperties": false
      }
    },
    "additionalProperties": false
  })";

  PeerMigration(sdk::Host host, std::string_view config_json)
      : PeerMigration(host, parseConfig(config_json)) {}

 private:
  PeerMigration(sdk::Host host, PeerConfig config)
      : ConcurrentBlockMigration(host, config.bandwidth_bytes_per_s), config_(std::move(config)) {}

  std::string moveAll(const std::vector<BlockToMove>& blocks,
                      const std::vector<PeerTarget>& peers) override {
    std::vector<PeerTarget> usable;
    for (const auto& p : peers) {
      Endpoint e;
      if (!parseUrl(p.block_url, e)) {
        host_.warn("peer " + p.executor_id + ": unusable block_url '" + p.block_url + "'");
      } else if (e.https && !config_.tls) {
        host_.warn("peer " + p.executor_id + ": block_url '" + p.block_url +
                   "' is https:// but this agent has no tls section");
      } else if (!e.https && config_.tls) {
        host_.warn("peer " + p.executor_id + ": refusing to send blocks in clear text to '" +
                   p.block_url + "': this agent uses TLS");
      } else {
        usable.push_back(p);
      }
    }
    if (usable.empty()) return failEveryBlock(blocks, "no peers");
    peer_failures_ = std::vector<int>(usable.size(), 0);
    peer_decommissioning_ = std::vector<bool>(usable.size(), false);
    return moveBlocks(host_, blocks, config_.max_concurrent,
                      [&](const BlockToMove& block, std::size_t i) -> MoveOutcome {
                        // A peer that goes away mid-body must be an error here, never a signal.
                        sigset_t pipe;
                        sigemptyset(&pipe);
                        sigaddset(&pipe, SIGPIPE);
                        pthread_sigmask(SIG_BLOCK, &pipe, nullptr);
                        if (cancelled_) return {std::nullopt, "cancelled"};
                        std::string why;
                        std::optional<std::size_t> target = moveBlock(block, usable, i, why);
                        if (!target) return {std::nullopt, why};
                        const PeerTarget& peer = usable[*target];
                        std::string location = peer.block_url + "/blocks/" + block.id;
                        while (location.find("//blocks/") != std::string::npos) {
                          location.replace(location.find("//blocks/"), 9, "/blocks/");
                        }
                        return {BlockMoved{location, peer.executor_id}, {}};
                      });
  }

  // Tries the peers until one takes the block, each at most once: returns its index, or
  // nullopt with `why`. A peer that refuses because it decommissions itself (503) is not
  // counted against the block (as Spark does since SPARK-44126) and gets no more blocks this
  // pass; any other failure counts, and the block stops after max_failures_per_block of them.
  std::optional<std::size_t> moveBlock(const BlockToMove& block,
                                       const std::vector<PeerTarget>& peers, std::size_t salt,
                                       std::string& why) {
    std::set<std::size_t> tried;
    std::string reasons;
    int failures = 0;
    while (failures < config_.max_failures_per_block && !cancelled_) {
      std::optional<std::size_t> pick = pickPeer(peers.size(), salt, tried);
      if (!pick) break;  // every peer was tried, or decommissions
      tried.insert(*pick);
      PutOutcome outcome = put(block, peers[*pick]);
      if (outcome.ok) {
        std::lock_guard lock(peers_mutex_);
        peer_failures_[*pick] = 0;
        return pick;
      }
      std::string line = peers[*pick].executor_id + ": " + outcome.message;
      reasons += (reasons.empty() ? "" : "; ") + line;
      if (outcome.status == 503) {
        {
          std::lock_guard lock(peers_mutex_);
          peer_decommissioning_[*pick] = true;
        }
        host_.info("block " + block.id + " to peer " + line +
                   " (decommissioning: not counted as a failed try; no more blocks go to it "
                   "this pass)");
        continue;
      }
      ++failures;
      {
        std::lock_guard lock(peers_mutex_);
        ++peer_failures_[*pick];
      }
      host_.warn("block " + block.id + " to peer " + line);
      if (config_.retry_delay_ms > 0 && failures < config_.max_failures_per_block &&
          tried.size() < peers.size()) {
        std::this_thread::sleep_for(std::chrono::milliseconds(config_.retry_delay_ms));
      }
    }
    if (reasons.empty()) {
      reasons = cancelled_ ? "cancelled"
                           : "no peer left to try: every peer refused a block this pass because "
                             "it is decommissioning (HTTP 503)";
    }
    why = reasons;
    return std::nullopt;
  }

  // The untried peer that does not decommission with the fewest recent failures, spreading
  // blocks by `salt`; nullopt when none is left.
  std::optional<std::size_t> pickPeer(std::size_t count, std::size_t salt,
                                      const std::set<std::size_t>& tried) {
    std::lock_guard lock(peers_mutex_);
    std::optional<std::size_t> best;
    for (std::size_t k = 0; k < count; ++k) {
      std::size_t p = (salt + k) % count;
      if (tried.count(p) != 0 || peer_decommissioning_[p]) continue;
      if (!best || peer_failures_[p] < peer_failures_[*best]) best = p;
    }
    return best;
  }

  // Opens the block's file into `file` and sets `size`; false (with out.message) when it
  // cannot be opened.
  static bool openBlock(const BlockToMove& block, Socket& file, std::uint64_t& size,
                        PutOutcome& out) {
    int fd = ::open(block.path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      out.message = errnoText("cannot open " + block.path);
      return false;
    }
    file.reset(fd);
    struct stat st {};
    ::fstat(fd, &st);
    size = static_cast<std::uint64_t>(st.st_size);
    return true;
  }

  PutOutcome put(const BlockToMove& block, const PeerTarget& peer) {
    PutOutcome out;
    Endpoint endpoint;
    parseUrl(peer.block_url, endpoint);
    if (endpoint.https) return putTls(block, peer, endpoint);
    Socket file_guard;
    std::uint64_t size = 0;
    if (!openBlock(block, file_guard, size, out)) return out;
    const int file = file_guard.fd();

    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    if (int rc = ::getaddrinfo(endpoint.host.c_str(), endpoint.port.c_str(), &hints, &found);
        rc != 0) {
      out.message = "cannot resolve " + endpoint.host + ": " + gai_strerror(rc);
      return out;
    }
    Socket sock;
    timeval tv{config_.timeout_ms / 1000,
               static_cast<suseconds_t>(config_.timeout_ms % 1000) * 1000};
    std::string connect_error = "no address";
    for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
      int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
      if (fd < 0) continue;
      ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
      ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
      if (::connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
        sock.reset(fd);
        break;
      }
      connect_error = std::strerror(errno);
      ::close(fd);
    }
    ::freeaddrinfo(found);
    if (sock.fd() < 0) {
      out.message = "cannot connect to " + peer.block_url + ": " + connect_error;
      return out;
    }
    // Signed by the host (a cluster that authenticates; ABI 1.2): this plugin never holds the
    // secret. Each try gets a fresh signature, as the peer refuses a replayed one.
    const std::string target = endpoint.prefix + "/blocks/" + block.id;
    const std::string authorization = host_.signRequest("PUT", target, block.checksum);
    std::string head =
        "PUT " + target + " HTTP/1.1\r\nHost: " + endpoint.host + ":" + endpoint.port +
        "\r\nContent-Type: application/octet-stream\r\nContent-Length: " + std::to_string(size) +
        "\r\nX-Dockhand-Checksum: " + block.checksum +
        (authorization.empty() ? "" : "\r\nAuthorization: " + authorization) +
        "\r\nConnection: close\r\n\r\n";
    if (!sendAll(sock.fd(), head.data(), head.size())) {
      out.message = errnoText("cannot send to " + peer.block_url);
      return out;
    }
    const std::uint64_t piece = limiter_.limited() ? (256u << 10) : (8u << 20);
    off_t offset = 0;
    while (static_cast<std::uint64_t>(offset) < size) {
      if (cancelled_) {
        out.message = "cancelled";
        return out;
      }
      std::uint64_t n = std::min<std::uint64_t>(piece, size - static_cast<std::uint64_t>(offset));
      limiter_.acquire(n);
      ssize_t sent = ::sendfile(sock.fd(), file, &offset, n);
      if (sent < 0 && errno == EINTR) continue;
      if (sent <= 0) {
        out.message = errnoText("sending block to " + peer.block_url + " failed after " +
                                std::to_string(offset) + " of " + std::to_string(size) + " bytes");
        // A peer that refuses mid-body (disk full, decommissioning) answers, then stops
        // reading: its answer says why better than the broken pipe does.
        PutOutcome answered = readAnswer(sock.fd(), peer);
        if (answered.status != 0) return answered;
        return out;
      }
    }
    return readAnswer(sock.fd(), peer);
  }

  // The PUT over TLS: Poco's HTTPS client (the handshake verifies the peer's certificate and
  // host name), the body copied in pieces under the bandwidth limit.
  PutOutcome putTls(const BlockToMove& block, const PeerTarget& peer, const Endpoint& endpoint) {
    PutOutcome out;
    Socket file_guard;
    std::uint64_t size = 0;
    if (!openBlock(block, file_guard, size, out)) return out;
    const int file = file_guard.fd();
    const std::string target = endpoint.prefix + "/blocks/" + block.id;
    try {
      const auto session_ptr = tls::newClientSession(
          endpoint.host, static_cast<Poco::UInt16>(std::stoi(endpoint.port)), config_.tls);
      Poco::Net::HTTPClientSession& session = *session_ptr;
      session.setTimeout(Poco::Timespan(static_cast<long>(config_.timeout_ms / 1000),
                                        static_cast<long>((config_.timeout_ms % 1000) * 1000)));
      Poco::Net::HTTPRequest request(Poco::Net::HTTPRequest::HTTP_PUT, target,
                                     Poco::Net::HTTPMessage::HTTP_1_1);
      request.setContentType("application/octet-stream");
      request.setContentLength64(static_cast<Poco::Int64>(size));
      request.set("X-Dockhand-Checksum", block.checksum);
      const std::string authorization = host_.signRequest("PUT", target, block.checksum);
      if (!authorization.empty()) request.set("Authorization", authorization);
      request.setKeepAlive(false);
      std::ostream& body = session.sendRequest(request);
      const std::uint64_t piece = limiter_.limited() ? (256u << 10) : (1u << 20);
      std::vector<char> buffer(piece);
      std::uint64_t sent = 0;
      bool body_failed = false;
      while (sent < size) {
        if (cancelled_) {
          out.message = "cancelled";
          return out;
        }
        std::uint64_t n = std::min<std::uint64_t>(piece, size - sent);
        limiter_.acquire(n);
        ssize_t got = ::read(file, buffer.data(), n);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) {
          out.message = errnoText("cannot read " + block.path);
          return out;
        }
        body.write(buffer.data(), got);
        if (!body) {
          body_failed = true;
          break;
        }
        sent += static_cast<std::uint64_t>(got);
      }
      Poco::Net::HTTPResponse response;
      std::istream& in = session.receiveResponse(response);
      std::string text(4096, '\0');
      in.read(text.data(), static_cast<std::streamsize>(text.size()));
      text.resize(static_cast<std::size_t>(in.gcount()));
      while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
      out.status = static_cast<int>(response.getStatus());
      out.ok = !body_failed && (out.status == 201 || out.status == 200);
      out.message = "HTTP " + std::to_string(out.status) + (text.empty() ? "" : ": " + text);
      if (body_failed && out.ok)
        out.message = "sending the block failed after " + std::to_string(sent) + " bytes";
      return out;
    } catch (const Poco::Exception& e) {
      out.message = tls::isTlsException(e)
                        ? "TLS with " + peer.block_url + " failed: " + tls::explainFailure(e)
                        : "PUT to " + peer.block_url + " failed: " + e.displayText();
    } catch (const std::exception& e) {
      out.message = "PUT to " + peer.block_url + " failed: " + e.what();
    }
    return out;
  }

  // The answer to a PUT: the status line, and a short body saying why when it is a refusal.
  // status stays 0 when no HTTP answer came.
  static PutOutcome readAnswer(int fd, const PeerTarget& peer) {
    PutOutcome out;
    std::string answer;
    char buffer[4096];
    while (answer.size() < 16384) {
      ssize_t n = ::recv(fd, buffer, sizeof buffer, 0);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      answer.append(buffer, static_cast<std::size_t>(n));
    }
    if (answer.compare(0, 5, "HTTP/") != 0 || answer.find(' ') == std::string::npos) {
      out.message = "no valid answer from " + peer.block_url;
      return out;
    }
    out.status = std::atoi(answer.c_str() + answer.find(' ') + 1);
    out.ok = out.status == 201 || out.status == 200;
    std::string body;
    if (auto end = answer.find("\r\n\r\n"); end != std::string::npos) body = answer.substr(end + 4);
    while (!body.empty() && (body.back() == '\n' || body.back() == '\r')) body.pop_back();
    out.message = "HTTP " + std::to_string(out.status) + (body.empty() ? "" : ": " + body);
    return out;
  }

  PeerConfig config_;
  std::mutex peers_mutex_;
  std::vector<int> peer_failures_;
  // Peers that refused a block with 503 this pass: they decommission and take nothing more.
  std::vector<bool> peer_decommissioning_;
};

}  // namespace
}  // namespace dockhand::plugins

DOCKHAND_PLUGIN(dockhand::plugins::PeerMigration, "peer", "0.1.0",
                "Moves blocks to peer agents' block servers with HTTP PUT")
