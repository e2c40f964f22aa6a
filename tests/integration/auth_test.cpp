// Authentication with the real programs on 127.0.0.1: the Hello handshake between agents and
// the driver (and a scripted impostor driver), and the secret file's rules.
#include <sys/stat.h>

#include <filesystem>
#include <string>

#include <Poco/Net/HTTPClientSession.h>
#include <Poco/Net/HTTPRequest.h>
#include <Poco/Net/HTTPResponse.h>
#include <Poco/StreamCopier.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "dockhand/driver/cli.h"
#include "dockhand/protocol/auth.h"
#include "support/agent_command.h"
#include "support/fake_driver.h"
#include "support/process.h"

namespace dockhand::testing {
namespace {

namespace fs = std::filesystem;
using std::chrono_literals::operator""s;

constexpr const char* kSecret = "s3cr3t-f0r-the-auth-test-7b1e9d";
constexpr const char* kOtherSecret = "an0ther-s3cr3t-n0t-the-cluster";

class AuthTest : public ::testing::Test {
 protected:
  fs::path writeSecret(const std::string& name, const std::string& content, mode_t mode = 0600) {
    fs::path path = dir.path() / name;
    writeFile(path, content + "\n");
    ::chmod(path.c_str(), mode);
    return path;
  }

  // `dockhand-driver serve` with `extra` options; waits for its port.
  std::unique_ptr<ChildProcess> startDriver(const std::vector<std::string>& extra) {
    auto driver = startServingDriver(extra, port_file_, dir.path() / "driver.log", port_);
    EXPECT_NE(port_, 0) << driver->output();
    return driver;
  }

  std::unique_ptr<ChildProcess> startAgent(const std::string& driver_url, const std::string& id,
                                           const std::vector<std::string>& extra = {}) {
    AgentCommand command{.driver_url = driver_url,
                         .executor_id = id,
                         .app_id = "auth-test",
                         .cores = 1,
                         .work_dir = dir.path() / ("work-" + id),
                         .extra = extra};
    return std::make_unique<ChildProcess>(command.argv(), (dir.path() / (id + ".log")).string());
  }

  std::string driverUrl() const { return "ws://127.0.0.1:" + std::to_string(port_) + "/"; }

  nlohmann::json executors() {
    Poco::Net::HTTPClientSession session("127.0.0.1", static_cast<Poco::UInt16>(port_));
    session.setTimeout(Poco::Timespan(5, 0));
    Poco::Net::HTTPRequest request(Poco::Net::HTTPRequest::HTTP_GET, "/v1/executors",
                                   Poco::Net::HTTPMessage::HTTP_1_1);
    // A driver with the secret takes only signed control requests; one without ignores this.
    request.set("Authorization",
                dockhand::protocol::auth::makeRequestSigner(
                    dockhand::protocol::auth::ClusterSecret(kSecret))("GET", "/v1/executors", ""));
    session.sendRequest(request);
    Poco::Net::HTTPResponse response;
    std::string body;
    Poco::StreamCopier::copyToString(session.receiveResponse(response), body);
    return nlohmann::json::parse(body);
  }

  std::uint64_t authFailures() { return executors()["auth"]["failures"].get<std::uint64_t>(); }

  static bool contains(const std::string& text, const std::string& part) {
    return text.find(part) != std::string::npos;
  }

  TempDir dir;
  fs::path port_file_ = dir.path() / "port";
  int port_ = 0;
};

TEST_F(AuthTest, AgentWithTheSecretRegistersWithADriverThatRequiresIt) {
  fs::path secret = writeSecret("secret", kSecret);
  auto driver = startDriver({"--auth-secret-file", secret.string()});
  auto agent = startAgent(driverUrl(), "a1", {"--auth-secret-file", secret.string()});
  ASSERT_TRUE(waitUntil([&] { return contains(agent->output(), "Successfully registered"); }, 15s))
      << agent->output() << driver->output();
  EXPECT_TRUE(contains(agent->output(), "authenticated with driver")) << agent->output();
  nlohmann::json state = executors();
  EXPECT_EQ(state["auth"]["required"], true) << state;
  EXPECT_EQ(state["auth"]["failures"], 0) << state;
  EXPECT_EQ(state["executors"].size(), 1u) << state;
}

TEST_F(AuthTest, AgentWithoutASecretIsRefusedByADriverThatRequiresOne) {
  fs::path secret = writeSecret("secret", kSecret);
  auto driver = startDriver({"--auth-secret-file", secret.string()});
  auto agent = startAgent(driverUrl(), "a1");
  EXPECT_EQ(agent->waitExit(15s), toInt(ExitCode::kAuthFailed)) << agent->output();
  EXPECT_TRUE(contains(agent->output(), "the driver refused this agent")) << agent->output();
  EXPECT_TRUE(contains(agent->output(), "requires authentication")) << agent->output();
  EXPECT_TRUE(waitUntil([&] { return contains(driver->output(), "authentication failed"); }, 5s))
      << driver->output();
  EXPECT_TRUE(contains(driver->output(), "sent no proof")) << driver->output();
  EXPECT_EQ(authFailures(), 1u);
  EXPECT_TRUE(executors()["executors"].empty());
}

TEST_F(AuthTest, AgentWithAnotherSecretIsRefusedAndRefusesTheDriver) {
  fs::path secret = writeSecret("secret", kSecret);
  fs::path other = writeSecret("other", kOtherSecret);
  auto driver = startDriver({"--auth-secret-file", secret.string()});
  auto agent = startAgent(driverUrl(), "a1", {"--auth-secret-file", other.string()});
  EXPECT_EQ(agent->waitExit(15s), toInt(ExitCode::kAuthFailed)) << agent->output();
  // The driver proves itself first; the agent finds the proof wrong and says so to both.
  EXPECT_TRUE(contains(agent->output(), "the driver's proof does not match")) << agent->output();
  EXPECT_TRUE(
      waitUntil([&] { return contains(driver->output(), "the agent refused this driver"); }, 5s))
      << driver->output();
  EXPECT_EQ(authFailures(), 1u);
  EXPECT_TRUE(executors()["executors"].empty());
  for (const std::string& log : {agent->output(), driver->output()}) {
    EXPECT_FALSE(contains(log, kSecret)) << log;
    EXPECT_FALSE(contains(log, kOtherSecret)) << log;
  }
}

TEST_F(AuthTest, AgentWithASecretRefusesADriverWithout) {
  auto driver = startDriver({});
  fs::path secret = writeSecret("secret", kSecret);
  auto agent = startAgent(driverUrl(), "a1", {"--auth-secret-file", secret.string()});
  EXPECT_EQ(agent->waitExit(15s), toInt(ExitCode::kAuthFailed)) << agent->output();
  EXPECT_TRUE(contains(agent->output(), "did not prove it knows the cluster secret"))
      << agent->output();
  EXPECT_TRUE(
      waitUntil([&] { return contains(driver->output(), "the agent refused this driver"); }, 5s))
      << driver->output();
  EXPECT_EQ(executors()["auth"]["required"], false);
}

// The control API is on the port agents connect to, so it is as exposed as the driver: with a
// secret, `dockhand-driver decommission` must sign with the same one.
TEST_F(AuthTest, DecommissionCommandNeedsTheClusterSecret) {
  fs::path secret = writeSecret("secret", kSecret);
  fs::path other = writeSecret("other", kOtherSecret);
  auto driver = startDriver({"--auth-secret-file", secret.string()});
  auto agent = startAgent(driverUrl(), "a1", {"--auth-secret-file", secret.string()});
  ASSERT_TRUE(waitUntil([&] { return contains(agent->output(), "Successfully registered"); }, 15s))
      << agent->output() << driver->output();
  const std::string at = "127.0.0.1:" + std::to_string(port_);
  auto decommission = [&](const std::string& name, const std::vector<std::string>& extra) {
    std::vector<std::string> argv = {driverBinary(), "decommission", "a1", "--driver", at};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return std::make_unique<ChildProcess>(argv, (dir.path() / (name + ".log")).string());
  };
  auto unsigned_command = decommission("unsigned", {});
  EXPECT_EQ(unsigned_command->waitExit(15s), 1) << unsigned_command->output();
  EXPECT_TRUE(contains(unsigned_command->output(), "refused: HTTP 401"))
      << unsigned_command->output();
  EXPECT_TRUE(contains(unsigned_command->output(), "requires signed requests"))
      << unsigned_command->output();
  auto wrong = decommission("wrong", {"--auth-secret-file", other.string()});
  EXPECT_EQ(wrong->waitExit(15s), 1) << wrong->output();
  EXPECT_TRUE(contains(wrong->output(), "signature does not match")) << wrong->output();
  EXPECT_TRUE(contains(agent->output(), "Successfully registered"));
  EXPECT_FALSE(contains(agent->output(), "Decommission executor")) << agent->output();

  // --wait follows it (signed GETs of /v1/executors) until the agent has left.
  auto command =
      decommission("signed", {"--auth-secret-file", secret.string(), "--wait", "--timeout", "30"});
  EXPECT_EQ(command->waitExit(40s), 0) << command->output() << driver->output();
  EXPECT_TRUE(contains(command->output(), "executor a1 is decommissioning")) << command->output();
  EXPECT_TRUE(contains(command->output(), "executor a1 has left")) << command->output();
  EXPECT_EQ(agent->waitExit(20s), 0) << agent->output();
  EXPECT_EQ(authFailures(), 2u);
}

TEST_F(AuthTest, ImpostorDriverWithAnotherSecretIsRefusedByTheAgent) {
  FakeDriver::Options options;
  options.secret = kOtherSecret;
  FakeDriver impostor(options);
  fs::path secret = writeSecret("secret", kSecret);
  auto agent = startAgent(impostor.url(), "a1", {"--auth-secret-file", secret.string()});
  EXPECT_EQ(agent->waitExit(15s), toInt(ExitCode::kAuthFailed)) << agent->output();
  EXPECT_TRUE(contains(agent->output(), "the driver's proof does not match")) << agent->output();
  auto refusal = impostor.waitForType("Error", 5s);
  ASSERT_TRUE(refusal.has_value());
  EXPECT_EQ(refusal->error->code, "auth_failed");
  EXPECT_TRUE(contains(refusal->error->message, "proof does not match")) << refusal->error->message;
  for (const auto& frame : impostor.history()) {
    EXPECT_NE(frame.type, "Authenticate") << "the agent gave a proof to an unproven driver";
    EXPECT_NE(frame.type, "RegisterExecutor");
  }
}

TEST_F(AuthTest, FakeDriverWithTheSecretIsAccepted) {
  FakeDriver::Options options;
  options.secret = kSecret;
  FakeDriver driver(options);
  fs::path secret = writeSecret("secret", kSecret);
  auto agent = startAgent(driver.url(), "a1", {"--auth-secret-file", secret.string()});
  ASSERT_TRUE(driver.waitForRegistration(15s)) << agent->output();
  auto hello = driver.waitForType("Hello", 1s);
  ASSERT_TRUE(hello.has_value());
  ASSERT_TRUE(hello->body.contains("auth"));
  EXPECT_EQ(hello->body["auth"]["nonce"].get<std::string>().size(), 32u);
  EXPECT_TRUE(driver.waitForType("Authenticate", 1s).has_value());
}

TEST_F(AuthTest, JobRunsOnLocalAgentsThatAuthenticate) {
  fs::path secret = writeSecret("secret", kSecret);
  ChildProcess run(
      {driverBinary(), "run",
       (fs::path(DOCKHAND_SOURCE_DIR) / "examples" / "wordcount" / "job.json").string(),
       "--local-agents", "2", "--timeout", "60", "--auth-secret-file", secret.string(),
       "--keep-work-dirs"},
      (dir.path() / "run.log").string());
  auto code = run.waitExit(90s);
  EXPECT_EQ(code, 0) << run.output();
  EXPECT_TRUE(contains(run.output(), "job wordcount SUCCEEDED")) << run.output();
  EXPECT_FALSE(contains(run.output(), kSecret)) << run.output();
  // The local agents' logs (kept) show they authenticated and never show the secret.
  const std::string marker = "work dirs kept in ";
  const auto at = run.output().find(marker);
  ASSERT_NE(at, std::string::npos) << run.output();
  std::string kept = run.output().substr(at + marker.size());
  kept = kept.substr(0, kept.find('\n'));
  int authenticated = 0;
  for (const auto& entry : fs::recursive_directory_iterator(kept)) {
    if (!entry.is_regular_file() || entry.path().extension() != ".log") continue;
    const std::string log = readFile(entry.path());
    if (contains(log, "authenticated with driver")) ++authenticated;
    EXPECT_FALSE(contains(log, kSecret)) << entry.path();
  }
  EXPECT_EQ(authenticated, 2);
  fs::remove_all(kept);
}

TEST_F(AuthTest, SecretFileReadableByOthersIsRefusedWithTheReason) {
  fs::path secret = writeSecret("secret", kSecret, 0644);
  auto agent = startAgent("ws://127.0.0.1:9/", "a1", {"--auth-secret-file", secret.string()});
  EXPECT_EQ(agent->waitExit(15s), toInt(ExitCode::kConfigError)) << agent->output();
  EXPECT_TRUE(contains(agent->output(), secret.string())) << agent->output();
  EXPECT_TRUE(contains(agent->output(), "group or others")) << agent->output();
  EXPECT_TRUE(contains(agent->output(), "chmod 600")) << agent->output();
  EXPECT_FALSE(contains(agent->output(), kSecret)) << agent->output();

  ChildProcess driver(
      {driverBinary(), "serve", "--listen", "127.0.0.1:0", "--auth-secret-file", secret.string()},
      (dir.path() / "driver-0644.log").string());
  EXPECT_EQ(driver.waitExit(15s), static_cast<int>(driver::DriverExit::kConfigError))
      << driver.output();
  EXPECT_TRUE(contains(driver.output(), "group or others")) << driver.output();
  EXPECT_FALSE(contains(driver.output(), kSecret)) << driver.output();
}

TEST_F(AuthTest, ConfigShowRedactsAndNoLogHoldsTheSecret) {
  fs::path secret = writeSecret("secret", kSecret);
  fs::path config = dir.path() / "agent.json";
  writeFile(config, R"({"driver_url": "ws://127.0.0.1:9/", "executor_id": "a1", )"
                    R"("app_id": "auth-test", "auth_secret_file": ")" +
                        secret.string() + "\"}\n");
  ChildProcess show({agentBinary(), "config", "show", "--config", config.string()},
                    (dir.path() / "show.log").string());
  EXPECT_EQ(show.waitExit(15s), 0) << show.output();
  const std::string out = show.output();
  const auto at = out.find("/auth_secret_file");
  ASSERT_NE(at, std::string::npos) << out;
  EXPECT_TRUE(contains(out.substr(at, out.find('\n', at) - at), "\"<redacted>\"")) << out;
  EXPECT_FALSE(contains(out, kSecret)) << out;

  auto driver = startDriver({"--auth-secret-file", secret.string(), "--log-level", "trace"});
  auto agent = startAgent(driverUrl(), "a1", {"--config", config.string(), "--log-level", "trace"});
  ASSERT_TRUE(waitUntil([&] { return contains(agent->output(), "Successfully registered"); }, 15s))
      << agent->output();
  EXPECT_FALSE(contains(agent->output(), kSecret)) << agent->output();
  EXPECT_FALSE(contains(driver->output(), kSecret)) << driver->output();
}

}  // namespace
}  // namespace dockhand::testing
