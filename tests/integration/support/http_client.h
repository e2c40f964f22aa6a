// One plain HTTP request to a block server (or any URL on 127.0.0.1), for tests and benches.
#pragma once

#include <map>
#include <string>

namespace dockhand::testing {

struct HttpReply {
  int status = 0;                              // 0: no answer (connection refused, timed out)
  std::string body;                            // empty for HEAD
  std::string checksum;                        // the X-Dockhand-Checksum header, "" when absent
  std::map<std::string, std::string> headers;  // every response header, by name as sent
};

// GET or HEAD `url` with a 10 s timeout and `headers` (name -> value); never throws.
HttpReply httpRequest(const std::string& method, const std::string& url,
                      const std::map<std::string, std::string>& headers = {});
inline HttpReply httpGet(const std::string& url) { return httpRequest("GET", url); }

}  // namespace dockhand::testing
