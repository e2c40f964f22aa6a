// dockhand-driver decommission: a client of a running driver's control API
// (POST /v1/executors/<id>/decommission; with --wait, GET /v1/executors until the executor
// left), over https:// and signed when the config says so.
#include <chrono>
#include <iostream>
#include <iterator>
#include <memory>
#include <string>
#include <thread>
#include <utility>

#include <Poco/Exception.h>
#include <Poco/Net/HTTPClientSession.h>
#include <Poco/Net/HTTPRequest.h>
#include <Poco/Net/HTTPResponse.h>
#include <Poco/URI.h>
#include <fmt/format.h>

#include "dockhand/driver/cli.h"
#include "dockhand/driver/cli_options.h"
#include "dockhand/driver/cli_setup.h"
#include "dockhand/driver/report.h"
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

// How often --wait asks the driver.
constexpr auto kWaitPoll = std::chrono::milliseconds(500);

// --wait: asks GET /v1/executors (through `list`) until the executor has left, printing its
// progress each time it changes. Exit 0 once it left; 1 when --timeout passed first or the
// driver cannot be asked.
template <class List>
int waitForDecommission(const CliOptions& o, List list) {
  const auto deadline = o.timeout_s
                            ? std::chrono::steady_clock::now() + std::chrono::seconds(*o.timeout_s)
                            : std::chrono::steady_clock::time_point::max();
  std::string last;
  for (;;) {
    auto [status, answer] = list();
    const Json parsed = Json::parse(answer, nullptr, /*allow_exceptions=*/false);
    if (status != 200 || !parsed.is_object() || !parsed.value("executors", Json()).is_array()) {
      std::cerr << fmt::format("dockhand-driver: GET /v1/executors answered HTTP {}: {}\n", status,
                               answer);
      return static_cast<int>(DriverExit::kJobFailed);
    }
    const Json* agent = nullptr;
    for (const auto& entry : parsed["executors"]) {
      if (entry.value("executor_id", "") == o.decommission_id) agent = &entry;
    }
    if (agent == nullptr) {
      std::cout << fmt::format("executor {} has left", o.decommission_id) << std::endl;
      return static_cast<int>(DriverExit::kSuccess);
    }
    std::string line = formatDecommission(
        parseDecommissionProgress(o.decommission_id, agent->value("decommission", Json())));
    if (line != last) {
      std::cout << line << std::endl;
      last = std::move(line);
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      std::cerr << fmt::format(
          "dockhand-driver: executor {} is still decommissioning after {} s "
          "(--timeout)\n",
          o.decommission_id, *o.timeout_s);
      return static_cast<int>(DriverExit::kJobFailed);
    }
    std::this_thread::sleep_for(kWaitPoll);
  }
}

}  // namespace

int decommissionCommand(const CliOptions& o) {
  const HostPort driver = parseListen(o.driver);
  auto route = [](const std::string& id) {
    return fmt::format("/v1/executors/{}/decommission", id);
  };
  // A driver with TLS on serves its control API over https://: the config's tls section says
  // which CA to trust (and which certificate to present when it requires one). A driver with
  // a cluster secret takes only requests signed with it (auth_secret_file or the option).
  const DriverConfig config = loadConfig(o);
  // One request: its status and body. `signed_path` is the path as the server decodes it.
  auto call = [&](const std::string& method, const std::string& path,
                  const std::string& signed_path, const std::string& body) {
    auto session =
        clientSession(driver.host, driver.port, config.tls_client, std::chrono::seconds(10));
    Poco::Net::HTTPRequest request(method, path, Poco::Net::HTTPMessage::HTTP_1_1);
    if (!body.empty()) {
      request.setContentType("application/json");
      request.setContentLength64(static_cast<Poco::Int64>(body.size()));
    }
    if (config.secret) {
      request.set("Authorization",
                  protocol::auth::makeRequestSigner(*config.secret)(method, signed_path, body));
    }
    session->sendRequest(request) << body;
    Poco::Net::HTTPResponse response;
    std::istream& in = session->receiveResponse(response);
    std::string answer{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    return std::pair{static_cast<int>(response.getStatus()), std::move(answer)};
  };
  try {
    auto [status, answer] =
        call(Poco::Net::HTTPRequest::HTTP_POST, route(encodePathSegment(o.decommission_id)),
             route(o.decommission_id), Json{{"reason", o.reason}}.dump());
    if (status == Poco::Net::HTTPResponse::HTTP_OK) {
      std::cout << fmt::format("executor {} is decommissioning", o.decommission_id) << std::endl;
      if (!o.wait) return static_cast<int>(DriverExit::kSuccess);
      return waitForDecommission(o, [&] {
        return call(Poco::Net::HTTPRequest::HTTP_GET, "/v1/executors", "/v1/executors", "");
      });
    }
    Json parsed = Json::parse(answer, nullptr, /*allow_exceptions=*/false);
    std::string why = parsed.is_object() && parsed.contains("error") && parsed["error"].is_string()
                          ? parsed["error"].get<std::string>()
                          : answer;
    std::cerr << fmt::format("dockhand-driver: the driver at {} refused: HTTP {}: {}\n", o.driver,
                             status, why);
  } catch (const Poco::Exception& e) {
    std::cerr << fmt::format("dockhand-driver: cannot reach the driver at {}: {}\n", o.driver,
                             e.displayText());
  }
  return static_cast<int>(DriverExit::kJobFailed);
}

}  // namespace dockhand::driver
