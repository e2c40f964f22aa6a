// Test support: a real nginx, started by the test in a directory of its own, serving
// <dir>/www on 127.0.0.1 with WebDAV PUT and DELETE under /dav/ (nginx's dav module), logging
// each request to <dir>/access.log. One process (master_process off), so that the test stops
// exactly what it started. Nothing of the machine's own nginx (config, logs, service) is used.
#pragma once

#include <filesystem>
#include <memory>
#include <string>

#include "support/process.h"

namespace dockhand::testing {

class Nginx {
 public:
  // The nginx program, or "" when it is not installed (a test skips then, unless
  // DOCKHAND_REQUIRE_NGINX=1 says that CI installed it: then it fails).
  static std::string binary();
  static bool required();

  // Starts it under `dir` (created) and waits up to 10 s until it takes connections. Throws
  // std::runtime_error with nginx's log when it does not.
  explicit Nginx(std::filesystem::path dir);
  ~Nginx();
  Nginx(const Nginx&) = delete;
  Nginx& operator=(const Nginx&) = delete;

  // http://127.0.0.1:<port>: files under <dir>/www, read-only outside /dav.
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  // url()/dav, the store's base URL.
  std::string davUrl() const { return url() + "/dav"; }
  // Where a PUT to davUrl()/<name> lands.
  std::filesystem::path davDir() const { return dir_ / "www" / "dav"; }
  // Every request so far, a line each: "<method> <uri> <status> <bytes sent>".
  std::string accessLog() const;
  std::string errorLog() const;

 private:
  std::filesystem::path dir_;
  int port_ = 0;
  std::unique_ptr<ChildProcess> process_;
};

}  // namespace dockhand::testing
