// Fixtures of the driver's protocol tests (driver_protocol_test.cpp, driver_auth_test.cpp):
// the real `dockhand-driver serve` process on loopback (DriverProcess: started by the test,
// SIGTERM then SIGKILL at its end, its temp dir removed), a raw WebSocket client that speaks
// the frame format by hand, and a client of the control API. Every wait is bounded.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <Poco/Buffer.h>
#include <Poco/Net/HTTPClientSession.h>
#include <Poco/Net/HTTPRequest.h>
#include <Poco/Net/HTTPResponse.h>
#include <Poco/Net/NetException.h>
#include <Poco/Net/WebSocket.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "dockhand/protocol/auth.h"
#include "dockhand/tls/tls.h"

extern char** environ;

namespace driver_protocol_fixture {

namespace fs = std::filesystem;
using Json = nlohmann::json;
using Clock = std::chrono::steady_clock;
using Poco::Net::WebSocket;

// The driver under test: started in SetUp, stopped (SIGTERM, then SIGKILL) in TearDown.
class DriverProcess {
 public:
  explicit DriverProcess(const Json& config) {
    char templ[] = "/tmp/dockhand-driver-test-XXXXXX";
    if (::mkdtemp(templ) == nullptr) throw std::runtime_error("mkdtemp failed");
    dir_ = templ;
    std::ofstream(dir_ / "driver.json") << config.dump();
    const std::string bin = std::string(DOCKHAND_BIN_DIR) + "/dockhand-driver";
    std::vector<std::string> args = {bin,           "serve",
                                     "--listen",    "127.0.0.1:0",
                                     "--port-file", (dir_ / "port").string(),
                                     "--config",    (dir_ / "driver.json").string(),
                                     "--log-level", "debug"};
    std::vector<char*> argv;
    argv.reserve(args.size() + 1);
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t files;
    posix_spawn_file_actions_init(&files);
    const std::string log = (dir_ / "driver.log").string();
    posix_spawn_file_actions_addopen(&files, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&files, 1, 2);
    int rc = ::posix_spawn(&pid_, bin.c_str(), &files, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&files);
    if (rc != 0) throw std::runtime_error("cannot start " + bin);
  }

  ~DriverProcess() {
    if (pid_ > 0) {
      ::kill(pid_, SIGTERM);
      if (!waitExit(std::chrono::seconds(10))) {
        ::kill(pid_, SIGKILL);
        waitExit(std::chrono::seconds(5));
      }
    }
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  // The port from the port file, or 0 when it did not appear within the deadline.
  std::uint16_t waitForPort(std::chrono::seconds limit) {
    const auto deadline = Clock::now() + limit;
    while (Clock::now() < deadline) {
      std::ifstream in(dir_ / "port");
      int port = 0;
      if (in >> port && port > 0) return static_cast<std::uint16_t>(port);
      if (exited()) return 0;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return 0;
  }

  bool waitExit(std::chrono::seconds limit) {
    const auto deadline = Clock::now() + limit;
    while (Clock::now() < deadline) {
      if (exited()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }

  bool exited() {
    if (pid_ <= 0) return true;
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      exit_status_ = status;
      pid_ = -1;
      return true;
    }
    return false;
  }

  int exitStatus() const { return exit_status_; }
  void terminate() {
    if (pid_ > 0) ::kill(pid_, SIGTERM);
  }
  std::string log() const {
    std::ifstream in(dir_ / "driver.log");
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

 private:
  fs::path dir_;
  pid_t pid_ = -1;
  int exit_status_ = 0;
};

// A raw WebSocket client speaking the frame format by hand: ws://, or wss:// over a client
// context `tls`.
class Client {
 public:
  explicit Client(std::uint16_t port, const Poco::Net::Context::Ptr& tls = nullptr)
      : session_(dockhand::tls::newClientSession("127.0.0.1", port, tls)) {
    Poco::Net::HTTPRequest request(Poco::Net::HTTPRequest::HTTP_GET, "/",
                                   Poco::Net::HTTPMessage::HTTP_1_1);
    Poco::Net::HTTPResponse response;
    ws_ = std::make_unique<WebSocket>(*session_, request, response);
    ws_->setReceiveTimeout(Poco::Timespan(5, 0));
    ws_->setMaxPayloadSize(1 << 24);
  }

  void sendText(const std::string& text) {
    ws_->sendFrame(text.data(), static_cast<int>(text.size()), WebSocket::FRAME_TEXT);
  }
  void send(const Json& frame) { sendText(frame.dump()); }

  // The next frame that is not a driver Heartbeat; nullopt on close or timeout.
  std::optional<Json> receive(bool skip_heartbeats = true) {
    for (;;) {
      Poco::Buffer<char> buffer(0);
      int flags = 0;
      int n = 0;
      try {
        n = ws_->receiveFrame(buffer, flags);
      } catch (const Poco::Exception&) {
        return std::nullopt;
      }
      if (n <= 0 || (flags & WebSocket::FRAME_OP_BITMASK) == WebSocket::FRAME_OP_CLOSE) {
        return std::nullopt;
      }
      Json frame = Json::parse(std::string(buffer.begin(), buffer.size()));
      if (skip_heartbeats && frame.value("type", "") == "Heartbeat") continue;
      return frame;
    }
  }

  // True when the driver closes the connection within the receive timeout.
  bool closedByPeer() {
    for (int i = 0; i < 10; ++i) {
      Poco::Buffer<char> buffer(0);
      int flags = 0;
      try {
        int n = ws_->receiveFrame(buffer, flags);
        if (n <= 0 || (flags & WebSocket::FRAME_OP_BITMASK) == WebSocket::FRAME_OP_CLOSE) {
          return true;
        }
      } catch (const Poco::TimeoutException&) {
        return false;
      } catch (const Poco::Exception&) {
        return true;  // reset: closed as well
      }
    }
    return false;
  }

  Json ask(const std::string& type, Json body) {
    const std::uint64_t id = next_id_++;
    send({{"type", type}, {"id", id}, {"body", std::move(body)}});
    auto reply = receive();
    if (!reply) return Json{{"no_reply", true}};
    return *reply;
  }

  Json hello(int version = 1) {
    return ask("Hello", {{"protocol_version", version}, {"role", "agent"}, {"software", "test"}});
  }

  Json registerAs(const std::string& id, int cores = 2, const std::string& block_url = "") {
    Json body = {{"executor_id", id}, {"hostname", "127.0.0.1"}, {"cores", cores}};
    if (!block_url.empty()) body["block_url"] = block_url;
    return ask("RegisterExecutor", std::move(body));
  }

 private:
  std::unique_ptr<Poco::Net::HTTPClientSession> session_;
  std::unique_ptr<WebSocket> ws_;
  std::uint64_t next_id_ = 1;
};

inline Json baseConfig() {
  return {{"max_frame_bytes", 4096},
          {"heartbeat_interval_ms", 200},
          {"agent_timeout_ms", 60000},
          {"properties", {{"dockhand.driver.timeout_ms", "30000"}}}};
}

class DriverProtocolTest : public ::testing::Test {
 protected:
  void start(const Json& config = baseConfig()) {
    driver_ = std::make_unique<DriverProcess>(config);
    port_ = driver_->waitForPort(std::chrono::seconds(15));
    ASSERT_NE(port_, 0) << "dockhand-driver serve did not write its port\n" << driver_->log();
  }
  void TearDown() override {
    if (HasFailure() && driver_) std::cerr << "driver log:\n" << driver_->log();
  }
  std::unique_ptr<DriverProcess> driver_;
  std::uint16_t port_ = 0;
};

struct HttpResult {
  int status = 0;
  Json body;  // discarded when the body is not JSON (see text)
  std::string www_authenticate;
  std::string text;
};

// One request to the driver's control API.
inline HttpResult http(std::uint16_t port, const std::string& method, const std::string& path,
                       const std::string& body = "", const std::string& authorization = "") {
  Poco::Net::HTTPClientSession session("127.0.0.1", port);
  session.setTimeout(Poco::Timespan(5, 0));
  Poco::Net::HTTPRequest request(method, path, Poco::Net::HTTPMessage::HTTP_1_1);
  request.setContentLength64(static_cast<Poco::Int64>(body.size()));
  if (!authorization.empty()) request.set("Authorization", authorization);
  session.sendRequest(request) << body;
  Poco::Net::HTTPResponse response;
  std::istream& in = session.receiveResponse(response);
  std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  Json json = Json::parse(text, nullptr, false);
  return {.status = static_cast<int>(response.getStatus()),
          .body = std::move(json),
          .www_authenticate = response.get("WWW-Authenticate", ""),
          .text = std::move(text)};
}

// The entry of `id` in GET /v1/executors, or null.
inline Json executor(std::uint16_t port, const std::string& id) {
  HttpResult r = http(port, "GET", "/v1/executors");
  if (r.status != 200 || !r.body.contains("executors")) return nullptr;
  for (const auto& e : r.body["executors"]) {
    if (e.value("executor_id", "") == id) return e;
  }
  return nullptr;
}

inline std::vector<std::string> peerIds(const Json& reply) {
  std::vector<std::string> ids;
  for (const auto& p : reply["body"]["peers"]) ids.push_back(p["executor_id"]);
  return ids;
}

inline std::string errorCode(const Json& frame) {
  return frame.contains("error") ? frame["error"].value("code", "") : "";
}

}  // namespace driver_protocol_fixture
