// dockhand-driver fetch: GET one URL of the cluster (a task's log, an agent's log, a block, the
// driver's control API) the way the cluster's own programs do: signed with the cluster secret
// when there is one, over https:// with the config's tls section. On a cluster that
// authenticates, this is how a person reads what curl cannot.
#include <array>
#include <chrono>
#include <iostream>
#include <iterator>
#include <memory>
#include <string>

#include <Poco/Exception.h>
#include <Poco/Net/HTTPClientSession.h>
#include <Poco/Net/HTTPRequest.h>
#include <Poco/Net/HTTPResponse.h>
#include <Poco/URI.h>
#include <fmt/format.h>

#include "dockhand/driver/cli.h"
#include "dockhand/driver/cli_options.h"
#include "dockhand/driver/cli_setup.h"
#include "dockhand/driver/result_fetcher.h"
#include "dockhand/protocol/auth.h"
#include "dockhand/tls/tls.h"

namespace dockhand::driver {

int fetchCommand(const CliOptions& o) {
  const auto failed = static_cast<int>(DriverExit::kJobFailed);
  Poco::URI uri;
  try {
    uri = Poco::URI(o.fetch_url);
  } catch (const Poco::Exception& e) {
    std::cerr << fmt::format("dockhand-driver: fetch: '{}' is not a URL: {}\n", o.fetch_url,
                             e.displayText());
    return static_cast<int>(DriverExit::kUsage);
  }
  if ((uri.getScheme() != "http" && uri.getScheme() != "https") || uri.getHost().empty()) {
    std::cerr << fmt::format("dockhand-driver: fetch: '{}' is not an http:// or https:// URL\n",
                             o.fetch_url);
    return static_cast<int>(DriverExit::kUsage);
  }
  const DriverConfig config = loadConfig(o);
  const bool https = uri.getScheme() == "https";
  if (https && !config.tls_client) {
    std::cerr << fmt::format(
        "dockhand-driver: fetch: {} is https://: give --config FILE with the cluster's tls "
        "section (its ca_file verifies the server)\n",
        o.fetch_url);
    return static_cast<int>(DriverExit::kConfigError);
  }
  try {
    auto session = clientSession(uri.getHost(), uri.getPort(),
                                 https ? config.tls_client : Poco::Net::Context::Ptr(),
                                 std::chrono::seconds(30));
    Poco::Net::HTTPRequest request(Poco::Net::HTTPRequest::HTTP_GET, uri.getPathEtc(),
                                   Poco::Net::HTTPMessage::HTTP_1_1);
    if (config.secret) {
      // Servers check the path as they decode it, without the query.
      request.set("Authorization", protocol::auth::makeRequestSigner(*config.secret)(
                                       Poco::Net::HTTPRequest::HTTP_GET, uri.getPath(), ""));
    }
    session->sendRequest(request);
    Poco::Net::HTTPResponse response;
    std::istream& in = session->receiveResponse(response);
    const int status = static_cast<int>(response.getStatus());
    if (status < 200 || status > 299) {
      std::string body{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
      while (!body.empty() && (body.back() == '\n' || body.back() == '\r')) body.pop_back();
      std::cerr << fmt::format("dockhand-driver: fetch {}: HTTP {} {}{}{}\n", o.fetch_url, status,
                               response.getReason(), body.empty() ? "" : ": ", body);
      if (status == 401 && !config.secret) {
        std::cerr << "dockhand-driver: the server wants signed requests: give "
                     "--auth-secret-file F (or --config FILE with auth_secret_file)\n";
      }
      return failed;
    }
    std::array<char, 65536> buffer{};
    while (in) {
      in.read(buffer.data(), buffer.size());
      std::cout.write(buffer.data(), in.gcount());
    }
    std::cout.flush();
    if (!std::cout) {
      std::cerr << "dockhand-driver: fetch: cannot write to stdout\n";
      return failed;
    }
    return static_cast<int>(DriverExit::kSuccess);
  } catch (const Poco::Exception& e) {
    if (tls::isTlsException(e)) {
      std::cerr << fmt::format("dockhand-driver: fetch {}: TLS: {}\n", o.fetch_url,
                               tls::explainFailure(e));
    } else {
      std::cerr << fmt::format("dockhand-driver: fetch {}: {}\n", o.fetch_url, e.displayText());
    }
  }
  return failed;
}

}  // namespace dockhand::driver
