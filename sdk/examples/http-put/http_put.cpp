// The `http-put` migration plugin: PUTs each block to {"url": "http://store:8080/blocks"} as
// <url>/<id> (a WebDAV server such as nginx's dav module, or any server that stores a PUT), and
// answers {"id", "url"} for each block the store took: readers then GET the block there.
//
// It shows two things a store plugin needs:
//   - the answer that names an external store ("url"), which the agent checks with a HEAD
//     before it tells the driver (docs/plugins.md §5);
//   - a cancel() that wakes a migrate() blocked in a socket (dockhand/cancel.hpp).
// Plain http:// only: a store behind TLS needs a TLS library, which this example leaves out.
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <string_view>

#include <dockhand/cancel.hpp>
#include <dockhand/plugin.hpp>

namespace {

constexpr int kTimeoutMs = 30000;  // for each connect, write and answer

std::string stringField(std::string_view json, std::string_view key, std::size_t from = 0) {
  const std::string needle = "\"" + std::string(key) + "\"";
  auto at = json.find(needle, from);
  if (at == std::string_view::npos) return {};
  at = json.find('"', json.find(':', at + needle.size()) + 1);
  const auto end = json.find('"', at + 1);
  return std::string(json.substr(at + 1, end - at - 1));
}

std::string quoted(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

// http://HOST[:PORT]/PATH, split; empty host when it is not one.
struct Url {
  std::string host;
  std::string port = "80";
  std::string path;
};

Url parseUrl(const std::string& text) {
  Url url;
  const std::string scheme = "http://";
  if (text.compare(0, scheme.size(), scheme) != 0) return url;
  const std::string rest = text.substr(scheme.size());
  const auto slash = rest.find('/');
  const std::string authority = rest.substr(0, slash);
  url.path = slash == std::string::npos ? "" : rest.substr(slash);
  while (!url.path.empty() && url.path.back() == '/') url.path.pop_back();
  const auto colon = authority.rfind(':');
  url.host = authority.substr(0, colon);
  if (colon != std::string::npos) url.port = authority.substr(colon + 1);
  return url;
}

// A descriptor closed when it goes.
struct Fd {
  int fd = -1;
  explicit Fd(int f) : fd(f) {}
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
};

}  // namespace

class HttpPut : public dockhand::sdk::BlockMigration {
 public:
  static constexpr const char* kConfigSchema = R"({
    "type": "object",
    "properties": {"url": {"type": "string", "format": "uri", "pattern": "^http://"}},
    "required": ["url"],
    "additionalProperties": false
  })";

  HttpPut(dockhand::sdk::Host host, std::string_view config_json)
      : host_(host), base_(stringField(config_json, "url")), url_(parseUrl(base_)) {
    while (!base_.empty() && base_.back() == '/') base_.pop_back();
    if (url_.host.empty()) {
      throw std::runtime_error("url must be http://HOST[:PORT]/PATH, not '" + base_ + "'");
    }
  }

  // A migration thread; may block. request: {"blocks": [{"id": ..., "path": ..., ...}], ...}
  std::string migrate(std::string_view request_json) override {
    cancel_.reset();
    std::string migrated;
    std::string failed;
    for (auto at = request_json.find("\"id\""); at != std::string_view::npos;
         at = request_json.find("\"id\"", at + 1)) {
      if (cancel_.cancelled()) break;
      const std::string id = stringField(request_json, "id", at);
      const std::string path = stringField(request_json, "path", at);
      const std::string why = put(id, path);
      if (!why.empty()) {
        failed += (failed.empty() ? "" : ", ") + std::string("{\"id\": ") + quoted(id) +
                  ", \"reason\": " + quoted(why) + "}";
        continue;
      }
      const std::string where = base_ + "/" + id;
      migrated += (migrated.empty() ? "" : ", ") + std::string("{\"id\": ") + quoted(id) +
                  ", \"url\": " + quoted(where) + ", \"location\": " + quoted(where) + "}";
      host_.migrationProgress("{\"block\": " + quoted(id) + R"(, "done": true, "location": )" +
                              quoted(where) + "}");
    }
    return "{\"migrated\": [" + migrated + "], \"failed\": [" + failed + "]}";
  }

  // Any thread: wakes a migrate() waiting on its socket.
  void cancel() override { cancel_.cancel(); }

 private:
  // PUTs the file at `path` as <url>/<id>; an empty string once the store answered 201 or 204,
  // else why not.
  std::string put(const std::string& id, const std::string& path) {
    Fd file(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    struct stat st {};
    if (file.fd < 0 || ::fstat(file.fd, &st) != 0) return path + ": " + std::strerror(errno);
    std::string why;
    Fd socket(connectToStore(why));
    if (socket.fd < 0) return why;
    const std::string head = "PUT " + url_.path + "/" + id + " HTTP/1.1\r\nHost: " + url_.host +
                             ":" + url_.port + "\r\nContent-Length: " + std::to_string(st.st_size) +
                             "\r\nConnection: close\r\n\r\n";
    if (!(why = sendAll(socket.fd, head.data(), head.size())).empty()) return why;
    char buffer[1 << 16];
    for (;;) {
      const ssize_t n = ::read(file.fd, buffer, sizeof buffer);
      if (n < 0) return path + ": " + std::strerror(errno);
      if (n == 0) break;
      if (!(why = sendAll(socket.fd, buffer, static_cast<std::size_t>(n))).empty()) return why;
    }
    // The status line: "HTTP/1.1 201 Created".
    std::string answer;
    while (answer.find("\r\n") == std::string::npos && answer.size() < 4096) {
      if (!(why = wait(socket.fd, POLLIN)).empty()) return why;
      const ssize_t n = ::recv(socket.fd, buffer, sizeof buffer, 0);
      if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
      if (n <= 0) return "the store closed the connection before it answered";
      answer.append(buffer, static_cast<std::size_t>(n));
    }
    const std::string status = answer.substr(0, answer.find("\r\n"));
    const auto space = status.find(' ');
    const std::string code = space == std::string::npos ? "" : status.substr(space + 1, 3);
    if (code == "201" || code == "204") return {};
    return "the store answered '" + status + "'";
  }

  // A non-blocking socket connected to the store, or -1 with `why`.
  int connectToStore(std::string& why) {
    addrinfo hints{};
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    if (const int rc = ::getaddrinfo(url_.host.c_str(), url_.port.c_str(), &hints, &found);
        rc != 0) {
      why = url_.host + ": " + ::gai_strerror(rc);
      return -1;
    }
    int fd = ::socket(found->ai_family, found->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
                      found->ai_protocol);
    if (fd >= 0 && ::connect(fd, found->ai_addr, found->ai_addrlen) != 0 && errno != EINPROGRESS) {
      why = "connect to " + url_.host + ":" + url_.port + ": " + std::strerror(errno);
      ::close(fd);
      fd = -1;
    }
    ::freeaddrinfo(found);
    if (fd < 0) return fd;
    int error = 0;
    socklen_t len = sizeof error;
    if (!(why = wait(fd, POLLOUT)).empty() ||
        ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &len) != 0 || error != 0) {
      if (why.empty())
        why = "connect to " + url_.host + ":" + url_.port + ": " + std::strerror(error);
      ::close(fd);
      return -1;
    }
    return fd;
  }

  std::string sendAll(int fd, const char* data, std::size_t size) {
    while (size > 0) {
      if (std::string why = wait(fd, POLLOUT); !why.empty()) return why;
      const ssize_t n = ::send(fd, data, size, MSG_NOSIGNAL);
      if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
      if (n < 0) return std::string("sending to the store: ") + std::strerror(errno);
      data += n;
      size -= static_cast<std::size_t>(n);
    }
    return {};
  }

  // Empty once `fd` is ready; else why the block stops here (cancelled, or too slow a store).
  std::string wait(int fd, short events) {
    switch (cancel_.waitFor(fd, events, kTimeoutMs)) {
      case dockhand::sdk::Cancellation::Wait::kReady:
        return {};
      case dockhand::sdk::Cancellation::Wait::kCancelled:
        return "cancelled";
      case dockhand::sdk::Cancellation::Wait::kTimedOut:
        break;
    }
    return "the store did not answer within " + std::to_string(kTimeoutMs / 1000) + " s";
  }

  dockhand::sdk::Host host_;
  std::string base_;
  Url url_;
  dockhand::sdk::Cancellation cancel_;
};

DOCKHAND_PLUGIN(HttpPut, "http-put", "1.0.0", "PUTs blocks to an HTTP (WebDAV) store")
