// Protocol-level tests against the real `dockhand-driver serve` process on loopback, with a
// raw WebSocket client: every wait is bounded, the process and its temp dir are ours.
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

extern char** environ;

namespace {

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

// A raw WebSocket client speaking the frame format by hand.
class Client {
 public:
  explicit Client(std::uint16_t port) : session_("127.0.0.1", port) {
    Poco::Net::HTTPRequest request(Poco::Net::HTTPRequest::HTTP_GET, "/",
                                   Poco::Net::HTTPMessage::HTTP_1_1);
    Poco::Net::HTTPResponse response;
    ws_ = std::make_unique<WebSocket>(session_, request, response);
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
  Poco::Net::HTTPClientSession session_;
  std::unique_ptr<WebSocket> ws_;
  std::uint64_t next_id_ = 1;
};

Json baseConfig() {
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
  Json body;
  std::string www_authenticate;
};

// One request to the driver's control API.
HttpResult http(std::uint16_t port, const std::string& method, const std::string& path,
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
  return {static_cast<int>(response.getStatus()), Json::parse(text, nullptr, false),
          response.get("WWW-Authenticate", "")};
}

// The entry of `id` in GET /v1/executors, or null.
Json executor(std::uint16_t port, const std::string& id) {
  HttpResult r = http(port, "GET", "/v1/executors");
  if (r.status != 200 || !r.body.contains("executors")) return nullptr;
  for (const auto& e : r.body["executors"]) {
    if (e.value("executor_id", "") == id) return e;
  }
  return nullptr;
}

std::vector<std::string> peerIds(const Json& reply) {
  std::vector<std::string> ids;
  for (const auto& p : reply["body"]["peers"]) ids.push_back(p["executor_id"]);
  return ids;
}

std::string errorCode(const Json& frame) {
  return frame.contains("error") ? frame["error"].value("code", "") : "";
}

TEST_F(DriverProtocolTest, AnswersHelloWithItsVersion) {
  ASSERT_NO_FATAL_FAILURE(start());
  Client c(port_);
  Json reply = c.hello();
  EXPECT_EQ(reply["type"], "Reply");
  EXPECT_EQ(reply["re"], 1);
  EXPECT_EQ(reply["ok"], true);
  EXPECT_EQ(reply["body"]["protocol_version"], 1);
  EXPECT_EQ(reply["body"]["role"], "driver");
  EXPECT_EQ(reply["body"]["software"].get<std::string>().rfind("dockhand-driver ", 0), 0u);
}

TEST_F(DriverProtocolTest, RefusesAnotherProtocolVersionAndCloses) {
  ASSERT_NO_FATAL_FAILURE(start());
  Client c(port_);
  Json reply = c.hello(99);
  EXPECT_EQ(reply["ok"], false);
  EXPECT_EQ(errorCode(reply), "protocol_version");
  EXPECT_TRUE(c.closedByPeer());
}

TEST_F(DriverProtocolTest, FirstFrameMustBeHello) {
  ASSERT_NO_FATAL_FAILURE(start());
  Client c(port_);
  Json reply = c.registerAs("early");
  EXPECT_EQ(reply["ok"], false);
  EXPECT_EQ(errorCode(reply), "unexpected_message");
}

TEST_F(DriverProtocolTest, RegistersServesAppConfigAndRefusesADuplicateId) {
  ASSERT_NO_FATAL_FAILURE(start());
  Client first(port_);
  ASSERT_EQ(first.hello()["ok"], true);
  Json config = first.ask("RetrieveAppConfig", {{"resource_profile_id", 0}});
  ASSERT_EQ(config["ok"], true) << config;
  EXPECT_EQ(config["body"]["properties"]["dockhand.heartbeat.interval_ms"], "200");
  EXPECT_EQ(config["body"]["properties"]["dockhand.driver.timeout_ms"], "30000");
  ASSERT_EQ(first.registerAs("exec-1")["ok"], true);
  first.send({{"type", "LaunchedExecutor"}, {"body", {{"executor_id", "exec-1"}}}});

  // The driver heartbeats registered agents.
  auto beat = first.receive(/*skip_heartbeats=*/false);
  ASSERT_TRUE(beat.has_value());
  EXPECT_EQ((*beat)["type"], "Heartbeat");
  EXPECT_EQ((*beat)["body"]["executor_id"], "");

  Client second(port_);
  ASSERT_EQ(second.hello()["ok"], true);
  Json refused = second.registerAs("exec-1");
  EXPECT_EQ(refused["ok"], false);
  EXPECT_EQ(errorCode(refused), "duplicate_executor");
  EXPECT_NE(refused["error"]["message"].get<std::string>().find("exec-1"), std::string::npos);
  EXPECT_EQ(second.registerAs("exec-2")["ok"], true);
}

TEST_F(DriverProtocolTest, MalformedFramesGetErrorsAndOtherClientsAreStillServed) {
  ASSERT_NO_FATAL_FAILURE(start());
  Client bad(port_);
  Client good(port_);
  ASSERT_EQ(bad.hello()["ok"], true);
  ASSERT_EQ(good.hello()["ok"], true);
  ASSERT_EQ(good.registerAs("good-1")["ok"], true);

  bad.sendText("this is not JSON {");
  auto e1 = bad.receive();
  ASSERT_TRUE(e1.has_value());
  EXPECT_EQ((*e1)["type"], "Error");
  EXPECT_EQ(errorCode(*e1), "malformed_frame");

  bad.sendText("[1, 2, 3]");
  auto e2 = bad.receive();
  ASSERT_TRUE(e2.has_value());
  EXPECT_EQ(errorCode(*e2), "malformed_frame");

  bad.send({{"type", "NoSuchMessage"}, {"id", 40}});
  auto e3 = bad.receive();
  ASSERT_TRUE(e3.has_value());
  EXPECT_EQ((*e3)["type"], "Reply");
  EXPECT_EQ((*e3)["re"], 40);
  EXPECT_EQ(errorCode(*e3), "unknown_type");

  bad.send({{"type", "RegisterExecutor"},
            {"id", 41},
            {"body", {{"executor_id", "x"}, {"cores", "many"}}}});
  auto e4 = bad.receive();
  ASSERT_TRUE(e4.has_value());
  EXPECT_EQ((*e4)["re"], 41);
  EXPECT_EQ(errorCode(*e4), "invalid_body");

  bad.send({{"type", "StatusUpdate"}, {"body", {{"executor_id", "x"}}}});
  auto e5 = bad.receive();
  ASSERT_TRUE(e5.has_value());
  EXPECT_EQ((*e5)["type"], "Error");
  EXPECT_EQ(errorCode(*e5), "not_registered");

  // Both connections are still served.
  EXPECT_EQ(bad.ask("RetrieveAppConfig", Json::object())["ok"], true);
  EXPECT_EQ(good.ask("RetrieveAppConfig", Json::object())["ok"], true);
  EXPECT_EQ(bad.registerAs("bad-1")["ok"], true);
}

TEST_F(DriverProtocolTest, RefusesAnOversizedFrameAndCloses) {
  ASSERT_NO_FATAL_FAILURE(start());
  Client big(port_);
  Client bystander(port_);
  ASSERT_EQ(big.hello()["ok"], true);
  ASSERT_EQ(bystander.hello()["ok"], true);
  big.sendText(std::string(64 * 1024, 'x'));
  auto error = big.receive();
  ASSERT_TRUE(error.has_value());
  EXPECT_EQ((*error)["type"], "Error");
  EXPECT_EQ(errorCode(*error), "frame_too_large");
  EXPECT_TRUE(big.closedByPeer());
  EXPECT_EQ(bystander.registerAs("still-here")["ok"], true);
  Client after(port_);
  EXPECT_EQ(after.hello()["ok"], true);
}

TEST_F(DriverProtocolTest, SilentAgentIsDroppedAndItsIdFreed) {
  Json config = baseConfig();
  config["agent_timeout_ms"] = 800;
  config["heartbeat_interval_ms"] = 300;
  ASSERT_NO_FATAL_FAILURE(start(config));
  Client quiet(port_);
  ASSERT_EQ(quiet.hello()["ok"], true);
  ASSERT_EQ(quiet.registerAs("quiet-1")["ok"], true);
  EXPECT_TRUE(quiet.closedByPeer());

  Client again(port_);
  ASSERT_EQ(again.hello()["ok"], true);
  EXPECT_EQ(again.registerAs("quiet-1")["ok"], true);
}

TEST_F(DriverProtocolTest, PeersAreOtherAgentsWithABlockServerThatAreNotLeaving) {
  ASSERT_NO_FATAL_FAILURE(start());
  Client a(port_);
  Client b(port_);
  Client c(port_);
  Client plain(port_);
  for (Client* client : {&a, &b, &c, &plain}) ASSERT_EQ(client->hello()["ok"], true);
  ASSERT_EQ(a.registerAs("a", 2, "http://127.0.0.1:1001/")["ok"], true);
  ASSERT_EQ(b.registerAs("b", 2, "http://127.0.0.1:1002/")["ok"], true);
  ASSERT_EQ(c.registerAs("c", 2, "http://127.0.0.1:1003/")["ok"], true);
  ASSERT_EQ(plain.registerAs("plain", 2)["ok"], true);

  Json peers = a.ask("GetPeers", {{"executor_id", "a"}});
  ASSERT_EQ(peers["ok"], true) << peers;
  EXPECT_EQ(peerIds(peers), (std::vector<std::string>{"b", "c"}));
  EXPECT_EQ(peers["body"]["peers"][0]["block_url"], "http://127.0.0.1:1002/");

  Json accepted = c.ask("ExecutorDecommissioning", {{"executor_id", "c"}});
  ASSERT_EQ(accepted["ok"], true) << accepted;
  EXPECT_EQ(accepted["body"]["accepted"], true);
  EXPECT_EQ(peerIds(a.ask("GetPeers", {{"executor_id", "a"}})), std::vector<std::string>{"b"});
  // The leaving agent itself still gets the others.
  EXPECT_EQ(peerIds(c.ask("GetPeers", {{"executor_id", "c"}})),
            (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(executor(port_, "c")["state"], "decommissioning");
}

TEST_F(DriverProtocolTest, ControlApiListsExecutorsAndDecommissionsOne) {
  ASSERT_NO_FATAL_FAILURE(start());
  Client agent(port_);
  ASSERT_EQ(agent.hello()["ok"], true);
  ASSERT_EQ(agent.registerAs("exec-1", 2, "http://127.0.0.1:1001/")["ok"], true);
  agent.send({{"type", "LaunchedExecutor"}, {"body", {{"executor_id", "exec-1"}}}});
  agent.send({{"type", "UpdateBlockInfo"},
              {"body",
               {{"executor_id", "exec-1"},
                {"added",
                 {{{"id", "shuffle_0_0_0"},
                   {"size", 10},
                   {"executor_id", "exec-1"},
                   {"url", "http://127.0.0.1:1001/blocks/shuffle_0_0_0"}},
                  {{"id", "shuffle_0_0_1"},
                   {"size", 12},
                   {"executor_id", ""},
                   {"url", "fallback:shuffle_0_0_1"}}}}}}});

  // UpdateBlockInfo is one-way: poll the listing until it shows.
  Json listed;
  const auto deadline = Clock::now() + std::chrono::seconds(5);
  while (Clock::now() < deadline) {
    listed = executor(port_, "exec-1");
    if (!listed.is_null() && listed["state"] == "active" && listed["blocks"] == 1) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_FALSE(listed.is_null());
  EXPECT_EQ(listed["state"], "active");
  EXPECT_EQ(listed["blocks"], 1);
  EXPECT_EQ(listed["cores"], 2);
  EXPECT_EQ(listed["block_url"], "http://127.0.0.1:1001/");
  EXPECT_EQ(http(port_, "GET", "/v1/executors").body["fallback_blocks"], 1);

  HttpResult done =
      http(port_, "POST", "/v1/executors/exec-1/decommission", R"({"reason": "spot reclaim"})");
  EXPECT_EQ(done.status, 200) << done.body;
  auto order = agent.receive();
  ASSERT_TRUE(order.has_value());
  EXPECT_EQ((*order)["type"], "DecommissionExecutor");
  EXPECT_EQ((*order)["body"]["reason"], "spot reclaim");
  EXPECT_EQ(executor(port_, "exec-1")["state"], "decommissioning");

  HttpResult unknown = http(port_, "POST", "/v1/executors/nobody/decommission");
  EXPECT_EQ(unknown.status, 404);
  EXPECT_NE(unknown.body.value("error", "").find("nobody"), std::string::npos) << unknown.body;
  EXPECT_EQ(http(port_, "GET", "/v1/executors/exec-1/decommission").status, 405);
  EXPECT_EQ(http(port_, "GET", "/v1/nothing").status, 404);

  // Progress in heartbeats, then a clean leave.
  agent.send({{"type", "Heartbeat"},
              {"body",
               {{"executor_id", "exec-1"},
                {"running_tasks", 0},
                {"decommission",
                 {{"state", "migrating"}, {"blocks_total", 1}, {"blocks_migrated", 0}}}}}});
  agent.send({{"type", "RemoveExecutor"},
              {"body", {{"executor_id", "exec-1"}, {"reason", "decommission finished"}}}});
  const auto gone_by = Clock::now() + std::chrono::seconds(5);
  while (Clock::now() < gone_by && !executor(port_, "exec-1").is_null()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_TRUE(executor(port_, "exec-1").is_null());
  const std::string log = driver_->log();
  EXPECT_NE(log.find("agent 'exec-1' decommission migrating"), std::string::npos) << log;
  EXPECT_NE(log.find("agent 'exec-1' finished decommissioning and left"), std::string::npos) << log;
}

TEST_F(DriverProtocolTest, ExitsCleanlyOnSigtermWithAgentsConnected) {
  ASSERT_NO_FATAL_FAILURE(start());
  Client agent(port_);
  ASSERT_EQ(agent.hello()["ok"], true);
  ASSERT_EQ(agent.registerAs("exec-1")["ok"], true);
  driver_->terminate();
  // The agent is told to stop, then the connection closes.
  auto stop = agent.receive();
  ASSERT_TRUE(stop.has_value());
  EXPECT_EQ((*stop)["type"], "StopExecutor");
  EXPECT_TRUE(agent.closedByPeer());
  ASSERT_TRUE(driver_->waitExit(std::chrono::seconds(10)));
  EXPECT_TRUE(WIFEXITED(driver_->exitStatus()));
  EXPECT_EQ(WEXITSTATUS(driver_->exitStatus()), 0);
}

// ---- authentication (docs/security.md) ------------------------------------------------------

namespace auth = dockhand::protocol::auth;

class DriverAuthTest : public DriverProtocolTest {
 protected:
  void SetUp() override {
    char templ[] = "/tmp/dockhand-driver-auth-XXXXXX";
    ASSERT_NE(::mkdtemp(templ), nullptr);
    secret_dir_ = templ;
    std::ofstream(secret_dir_ / "secret") << kSecret << "\n";
    fs::permissions(secret_dir_ / "secret", fs::perms::owner_read | fs::perms::owner_write);
    Json config = baseConfig();
    config["auth_secret_file"] = (secret_dir_ / "secret").string();
    ASSERT_NO_FATAL_FAILURE(start(config));
  }
  void TearDown() override {
    DriverProtocolTest::TearDown();
    std::error_code ec;
    fs::remove_all(secret_dir_, ec);
  }
  static Json helloWith(const std::string& nonce) {
    return {{"protocol_version", 1},
            {"role", "agent"},
            {"auth", {{"scheme", "hmac-sha256"}, {"nonce", nonce}}}};
  }
  // The control API takes only requests signed with the cluster secret.
  static std::string signature(const auth::ClusterSecret& secret, const std::string& method,
                               const std::string& path, const std::string& body) {
    return auth::signRequest(secret, auth::RequestToSign{method, path, body}, auth::wallClockMs(),
                             auth::randomNonce());
  }
  HttpResult signedHttp(const std::string& method, const std::string& path,
                        const std::string& body = "") {
    return http(port_, method, path, body, signature(secret_, method, path, body));
  }
  std::uint64_t authFailures() {
    return signedHttp("GET", "/v1/executors").body["auth"]["failures"].get<std::uint64_t>();
  }

  static constexpr const char* kSecret = "driver-protocol-test-secret-0042";
  const auth::ClusterSecret secret_{kSecret};
  fs::path secret_dir_;
};

TEST_F(DriverAuthTest, ProvesItselfAndAcceptsTheAgentsProof) {
  Client c(port_);
  const std::string agent_nonce = auth::randomNonce();
  Json reply = c.ask("Hello", helloWith(agent_nonce));
  ASSERT_EQ(reply.value("ok", true), true) << reply;
  const Json& a = reply["body"]["auth"];
  const std::string driver_nonce = a["nonce"];
  EXPECT_TRUE(auth::validNonce(driver_nonce));
  EXPECT_TRUE(auth::checkHelloProof(secret_, "driver", agent_nonce, driver_nonce,
                                    a["proof"].get<std::string>()));
  Json accepted = c.ask("Authenticate",
                        {{"proof", auth::helloProof(secret_, "agent", agent_nonce, driver_nonce)}});
  EXPECT_EQ(accepted.value("ok", true), true) << accepted;
  EXPECT_EQ(c.registerAs("e1").value("ok", true), true);
  EXPECT_EQ(authFailures(), 0u);
  EXPECT_EQ(signedHttp("GET", "/v1/executors").body["auth"]["required"], true);
}

// Whoever reaches the driver's port must hold the secret to read or steer it: unsigned,
// wrongly signed, replayed and altered control requests are refused (401) and counted.
TEST_F(DriverAuthTest, ControlApiTakesOnlyRequestsSignedWithTheSecret) {
  const std::string decommission = "/v1/executors/e1/decommission";
  HttpResult unsigned_get = http(port_, "GET", "/v1/executors");
  EXPECT_EQ(unsigned_get.status, 401);
  EXPECT_EQ(unsigned_get.www_authenticate, "Dockhand-HMAC-SHA256");
  EXPECT_NE(unsigned_get.body["error"].get<std::string>().find("requires signed requests"),
            std::string::npos)
      << unsigned_get.body;
  EXPECT_FALSE(unsigned_get.body.contains("executors"));

  const auth::ClusterSecret other("another-cluster-secret-of-32-bytes");
  HttpResult wrong = http(port_, "POST", decommission, R"({"reason":"x"})",
                          signature(other, "POST", decommission, R"({"reason":"x"})"));
  EXPECT_EQ(wrong.status, 401);
  EXPECT_NE(wrong.body["error"].get<std::string>().find("signature does not match"),
            std::string::npos)
      << wrong.body;

  // Signed for one body, sent with another; signed for one path, sent to another.
  HttpResult altered = http(port_, "POST", decommission, R"({"reason":"y"})",
                            signature(secret_, "POST", decommission, R"({"reason":"x"})"));
  EXPECT_EQ(altered.status, 401) << altered.body;
  HttpResult moved = http(port_, "POST", "/v1/executors/e2/decommission", "",
                          signature(secret_, "POST", decommission, ""));
  EXPECT_EQ(moved.status, 401) << moved.body;

  const std::string header = signature(secret_, "GET", "/v1/executors", "");
  HttpResult first = http(port_, "GET", "/v1/executors", "", header);
  EXPECT_EQ(first.status, 200) << first.body;
  HttpResult replayed = http(port_, "GET", "/v1/executors", "", header);
  EXPECT_EQ(replayed.status, 401);
  EXPECT_NE(replayed.body["error"].get<std::string>().find("replayed request"), std::string::npos)
      << replayed.body;
  EXPECT_EQ(signedHttp("POST", decommission).status, 404) << "signed: reaches the API";
  EXPECT_EQ(authFailures(), 5u);
  EXPECT_NE(driver_->log().find("control request GET /v1/executors refused"), std::string::npos);
}

TEST_F(DriverAuthTest, RefusesHelloWithoutProofAndCloses) {
  Client c(port_);
  Json reply = c.hello();
  EXPECT_EQ(reply.value("ok", true), false) << reply;
  EXPECT_EQ(errorCode(reply), "auth_failed");
  EXPECT_NE(reply["error"]["message"].get<std::string>().find("requires authentication"),
            std::string::npos);
  EXPECT_TRUE(c.closedByPeer());
  EXPECT_EQ(authFailures(), 1u);
  EXPECT_NE(driver_->log().find("authentication failed, refused"), std::string::npos);
}

TEST_F(DriverAuthTest, RefusesAWrongProofAndCloses) {
  Client c(port_);
  Json reply = c.ask("Hello", helloWith(auth::randomNonce()));
  ASSERT_EQ(reply.value("ok", true), true) << reply;
  Json refused = c.ask("Authenticate", {{"proof", std::string(64, '0')}});
  EXPECT_EQ(errorCode(refused), "auth_failed") << refused;
  EXPECT_TRUE(c.closedByPeer());
  EXPECT_EQ(authFailures(), 1u);
}

TEST_F(DriverAuthTest, AcceptsNothingButAuthenticateAfterHello) {
  Client c(port_);
  ASSERT_EQ(c.ask("Hello", helloWith(auth::randomNonce())).value("ok", true), true);
  Json refused = c.registerAs("e1");
  EXPECT_EQ(errorCode(refused), "auth_failed") << refused;
  EXPECT_TRUE(c.closedByPeer());
  EXPECT_TRUE(signedHttp("GET", "/v1/executors").body["executors"].empty());
}

TEST_F(DriverAuthTest, AReplayedProofFailsOnANewConnection) {
  const std::string agent_nonce = auth::randomNonce();
  std::string recorded;
  {
    Client first(port_);
    Json reply = first.ask("Hello", helloWith(agent_nonce));
    recorded = auth::helloProof(secret_, "agent", agent_nonce,
                                reply["body"]["auth"]["nonce"].get<std::string>());
    ASSERT_EQ(first.ask("Authenticate", {{"proof", recorded}}).value("ok", true), true);
  }
  // An eavesdropper replays the same Hello and proof: the driver's nonce is new.
  Client second(port_);
  Json reply = second.ask("Hello", helloWith(agent_nonce));
  ASSERT_EQ(reply.value("ok", true), true);
  Json refused = second.ask("Authenticate", {{"proof", recorded}});
  EXPECT_EQ(errorCode(refused), "auth_failed") << refused;
  EXPECT_TRUE(second.closedByPeer());
}

TEST_F(DriverAuthTest, RefusesABadNonceOrScheme) {
  Client c(port_);
  Json reply =
      c.ask("Hello", {{"protocol_version", 1}, {"auth", {{"scheme", "plain"}, {"nonce", "00"}}}});
  EXPECT_EQ(errorCode(reply), "auth_failed") << reply;
  EXPECT_TRUE(c.closedByPeer());
}

}  // namespace
