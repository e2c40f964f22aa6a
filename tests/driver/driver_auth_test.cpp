// The driver's authentication (docs/security.md) against the real `dockhand-driver serve`
// process: the Hello proofs both ways, refusals, replays, and the signed control API.
#include <filesystem>
#include <fstream>
#include <string>

#include "dockhand/protocol/auth.h"

#include <gtest/gtest.h>

#include "driver_protocol_fixture.h"

namespace {

using namespace driver_protocol_fixture;  // NOLINT(google-build-using-namespace)

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
    return auth::signRequest(secret,
                             auth::RequestToSign{.method = method, .path = path, .content = body},
                             auth::wallClockMs(), auth::randomNonce());
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
  // One count: /metrics says what /v1/executors says (control requests included).
  const HttpResult scraped = signedHttp("GET", "/metrics");
  EXPECT_NE(scraped.text.find("\ndockhand_driver_auth_failures_total 5\n"), std::string::npos)
      << scraped.text;
}

TEST_F(DriverAuthTest, StatusPageIsOpenButItsDataNeedsASignature) {
  // The page holds no cluster data; it signs its GET /v1/cluster in the browser.
  Poco::Net::HTTPClientSession session("127.0.0.1", port_);
  session.setTimeout(Poco::Timespan(5, 0));
  Poco::Net::HTTPRequest request("GET", "/", Poco::Net::HTTPMessage::HTTP_1_1);
  session.sendRequest(request);
  Poco::Net::HTTPResponse response;
  std::istream& in = session.receiveResponse(response);
  std::string page{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  EXPECT_EQ(response.getStatus(), Poco::Net::HTTPResponse::HTTP_OK);
  EXPECT_NE(page.find(R"(<body data-auth="required">)"), std::string::npos) << page;

  HttpResult unsigned_get = http(port_, "GET", "/v1/cluster");
  EXPECT_EQ(unsigned_get.status, 401);
  EXPECT_FALSE(unsigned_get.body.contains("executors"));
  HttpResult signed_get = signedHttp("GET", "/v1/cluster");
  EXPECT_EQ(signed_get.status, 200) << signed_get.body;
  EXPECT_EQ(signed_get.body["auth"]["required"], true);
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
