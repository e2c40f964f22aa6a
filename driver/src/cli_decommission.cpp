// dockhand-driver decommission: a client of a running driver's control API
// (POST /v1/executors/<id>/decommission), over https:// and signed when the config says so.
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

namespace dockhand::driver {
namespace {

// Percent-encodes what may not stand in a URL path segment as is.
std::string encodePathSegment(const std::string& text) {
  std::string out;
  Poco::URI::encode(text, "/?#%", out);
  return out;
}

}  // namespace

int decommissionCommand(const CliOptions& o) {
  const HostPort driver = parseListen(o.driver);
  auto route = [](const std::string& id) {
    return fmt::format("/v1/executors/{}/decommission", id);
  };
  const std::string path = route(encodePathSegment(o.decommission_id));
  // A driver with TLS on serves its control API over https://: the config's tls section says
  // which CA to trust (and which certificate to present when it requires one). A driver with
  // a cluster secret takes only requests signed with it (auth_secret_file or the option).
  const DriverConfig config = loadConfig(o);
  try {
    auto session_ptr =
        clientSession(driver.host, driver.port, config.tls_client, std::chrono::seconds(10));
    Poco::Net::HTTPClientSession& session = *session_ptr;
    Poco::Net::HTTPRequest request(Poco::Net::HTTPRequest::HTTP_POST, path,
                                   Poco::Net::HTTPMessage::HTTP_1_1);
    const std::string body = Json{{"reason", o.reason}}.dump();
    request.setContentType("application/json");
    request.setContentLength64(static_cast<Poco::Int64>(body.size()));
    if (config.secret) {
      // The server checks the path as it decodes it: the id as given, not percent-encoded.
      request.set("Authorization", protocol::auth::makeRequestSigner(*config.secret)(
                                       "POST", route(o.decommission_id), body));
    }
    session.sendRequest(request) << body;
    Poco::Net::HTTPResponse response;
    std::istream& in = session.receiveResponse(response);
    std::string answer{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    if (response.getStatus() == Poco::Net::HTTPResponse::HTTP_OK) {
      std::cout << fmt::format("executor {} is decommissioning\n", o.decommission_id);
      return static_cast<int>(DriverExit::kSuccess);
    }
    Json parsed = Json::parse(answer, nullptr, /*allow_exceptions=*/false);
    std::string why = parsed.is_object() && parsed.contains("error") && parsed["error"].is_string()
                          ? parsed["error"].get<std::string>()
                          : answer;
    std::cerr << fmt::format("dockhand-driver: the driver at {} refused: HTTP {}: {}\n", o.driver,
                             static_cast<int>(response.getStatus()), why);
  } catch (const Poco::Exception& e) {
    std::cerr << fmt::format("dockhand-driver: cannot reach the driver at {}: {}\n", o.driver,
                             e.displayText());
  }
  return static_cast<int>(DriverExit::kJobFailed);
}

}  // namespace dockhand::driver
