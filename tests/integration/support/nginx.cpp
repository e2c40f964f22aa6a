#include "support/nginx.h"

#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <stdexcept>

#include <Poco/Net/SocketAddress.h>
#include <Poco/Net/StreamSocket.h>

namespace dockhand::testing {

namespace fs = std::filesystem;

std::string Nginx::binary() {
  for (const char* candidate : {"/usr/sbin/nginx", "/usr/local/sbin/nginx"}) {
    if (::access(candidate, X_OK) == 0) return candidate;
  }
  return {};
}

bool Nginx::required() {
  const char* flag = std::getenv("DOCKHAND_REQUIRE_NGINX");
  return flag != nullptr && std::string(flag) == "1";
}

Nginx::Nginx(fs::path dir) : dir_(std::move(dir)) {
  if (binary().empty()) throw std::runtime_error("nginx is not installed");
  fs::create_directories(davDir());
  fs::create_directories(dir_ / "temp");
  // A port free now; another process could take it before nginx binds: then nginx says so in
  // its log and the constructor throws with it.
  port_ = unusedPort();
  const std::string d = dir_.string();
  writeFile(dir_ / "nginx.conf",
            "daemon off;\nmaster_process off;\nworker_processes 1;\n"
            "pid " +
                d + "/nginx.pid;\nerror_log " + d +
                "/error.log info;\n"
                "events { worker_connections 64; }\n"
                "http {\n"
                "  log_format requests '$request_method $request_uri $status $body_bytes_sent';\n"
                "  access_log " +
                d +
                "/access.log requests;\n"
                "  client_body_temp_path " +
                d +
                "/temp/body;\n"
                "  proxy_temp_path " +
                d +
                "/temp/proxy;\n"
                "  fastcgi_temp_path " +
                d +
                "/temp/fastcgi;\n"
                "  uwsgi_temp_path " +
                d +
                "/temp/uwsgi;\n"
                "  scgi_temp_path " +
                d +
                "/temp/scgi;\n"
                "  client_max_body_size 0;\n"
                "  server {\n"
                "    listen 127.0.0.1:" +
                std::to_string(port_) +
                ";\n"
                "    root " +
                d +
                "/www;\n"
                "    location /dav/ {\n"
                "      dav_methods PUT DELETE;\n"
                "      create_full_put_path on;\n"
                "      dav_access user:rw group:r all:r;\n"
                "    }\n"
                "  }\n"
                "}\n");
  process_ = std::make_unique<ChildProcess>(
      std::vector<std::string>{binary(), "-p", d, "-e", d + "/error.log", "-c", d + "/nginx.conf"},
      d + "/nginx.out");
  const bool up = waitUntil(
      [&] {
        if (!process_->running()) return true;
        try {
          Poco::Net::StreamSocket probe(Poco::Net::SocketAddress("127.0.0.1", port_));
          return true;
        } catch (const std::exception&) {
          return false;
        }
      },
      std::chrono::seconds(10));
  if (!up || !process_->running()) {
    throw std::runtime_error("nginx did not start:\n" + process_->output() + errorLog());
  }
}

Nginx::~Nginx() {
  if (process_ && process_->running()) {
    process_->signal(SIGQUIT);
    if (!process_->waitExit(std::chrono::seconds(10))) process_->signal(SIGKILL);
  }
}

std::string Nginx::accessLog() const {
  return fs::exists(dir_ / "access.log") ? readFile(dir_ / "access.log") : std::string();
}

std::string Nginx::errorLog() const {
  return fs::exists(dir_ / "error.log") ? readFile(dir_ / "error.log") : std::string();
}

}  // namespace dockhand::testing
