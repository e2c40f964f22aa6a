// TLS with the real programs on 127.0.0.1, over a PKI the test makes (support/test_pki.h):
// agents on wss://, block servers on https://, and every refusal a TLS cluster must make
// (another CA, another host name, a plain client, a missing client certificate), each with a
// clear message; unusable certificate and key files refused at start-up as config errors.
#include <filesystem>
#include <fstream>
#include <string>

#include <Poco/Net/HTTPClientSession.h>
#include <Poco/Net/HTTPRequest.h>
#include <Poco/Net/HTTPResponse.h>
#include <Poco/StreamCopier.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "blocks/block_fetcher.h"
#include "blocks/block_server.h"
#include "blocks/block_store.h"
#include "blocks/checksum.h"
#include "dockhand/driver/cli.h"
#include "dockhand/tls/tls.h"
#include "support/agent_command.h"
#include "support/process.h"
#include "support/test_pki.h"

namespace dockhand::testing {
namespace {

namespace fs = std::filesystem;
using std::chrono_literals::operator""s;

class TlsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!TestPki::available()) return;
    gPkiDir = new TempDir;
    gPki = new TestPki(gPkiDir->path() / "pki");
  }
  static void TearDownTestSuite() {
    delete gPki;
    delete gPkiDir;
    gPki = nullptr;
    gPkiDir = nullptr;
  }
  void SetUp() override {
    if (gPki == nullptr) GTEST_SKIP() << "the openssl program is not installed";
  }

  // A config file holding `{"tls": <tls>}` plus `extra` members.
  fs::path writeConfig(const std::string& name, const std::string& tls,
                       const std::string& extra = "") {
    fs::path path = dir.path() / name;
    writeFile(path, "{\"tls\": " + tls + (extra.empty() ? "" : ", " + extra) + "}\n");
    return path;
  }

  // `dockhand-driver serve` with TLS from `tls` (a tls object); waits for its port.
  std::unique_ptr<ChildProcess> startDriver(const std::string& tls) {
    fs::path config = writeConfig("driver.json", tls);
    auto driver = startServingDriver({"--config", config.string()}, port_file_,
                                     dir.path() / "driver.log", port_);
    EXPECT_NE(port_, 0) << driver->output();
    return driver;
  }

  // An agent with the config file `config` (may be empty) connecting to `scheme`://.
  std::unique_ptr<ChildProcess> startAgent(const std::string& id, const fs::path& config,
                                           const std::string& scheme = "wss",
                                           const std::vector<std::string>& env = {}) {
    const AgentCommand command{.config = config,
                               .driver_url = scheme + "://127.0.0.1:" + std::to_string(port_) + "/",
                               .executor_id = id,
                               .app_id = "tls-test",
                               .cores = 1,
                               .work_dir = dir.path() / ("work-" + id)};
    return std::make_unique<ChildProcess>(command.argv(), (dir.path() / (id + ".log")).string(),
                                          env);
  }

  static bool registered(const ChildProcess& agent) {
    return contains(agent.output(), "Successfully registered");
  }

  // GET `path` from the driver's control API over https with `client` (a tls object).
  nlohmann::json driverGet(const std::string& path, const std::string& client) {
    std::vector<protocol::JsonPathError> problems;
    tls::TlsConfig config = tls::readTlsConfig(nlohmann::json::parse(client), "/tls", problems);
    auto session_ptr = tls::newClientSession("127.0.0.1", static_cast<Poco::UInt16>(port_),
                                             tls::makeContext(config, tls::Role::kClient));
    Poco::Net::HTTPClientSession& session = *session_ptr;
    session.setTimeout(Poco::Timespan(5, 0));
    Poco::Net::HTTPRequest request(Poco::Net::HTTPRequest::HTTP_GET, path,
                                   Poco::Net::HTTPMessage::HTTP_1_1);
    session.sendRequest(request);
    Poco::Net::HTTPResponse response;
    std::string body;
    Poco::StreamCopier::copyToString(session.receiveResponse(response), body);
    return nlohmann::json::parse(body);
  }

  static TempDir* gPkiDir;
  static TestPki* gPki;
  TempDir dir;
  fs::path port_file_ = dir.path() / "port";
  int port_ = 0;
};

TempDir* TlsTest::gPkiDir = nullptr;
TestPki* TlsTest::gPki = nullptr;

TEST_F(TlsTest, AgentRegistersOverWssAndAdvertisesAnHttpsBlockServer) {
  auto driver = startDriver(gPki->tlsJson("server"));
  auto agent = startAgent("a1", writeConfig("agent.json", gPki->tlsJson("server")));
  ASSERT_TRUE(waitUntil([&] { return registered(*agent); }, 15s))
      << agent->output() << driver->output();
  EXPECT_TRUE(contains(agent->output(), "TLS on")) << agent->output();
  EXPECT_TRUE(contains(driver->output(), "serving agents on wss://")) << driver->output();
  // OpenSSL came with the TLS module, which the agent loaded because TLS is on (an agent
  // without TLS maps neither: AgentProcessTest.AnAgentWithoutTlsMapsNoOpenSsl).
  const std::string maps = readFile("/proc/" + std::to_string(agent->pid()) + "/maps");
  EXPECT_TRUE(contains(maps, "/libdockhand-tls.so")) << maps;
  EXPECT_TRUE(contains(maps, "/libssl.so")) << maps;
  // The control API is https:// too; the registration carries the https:// block URL.
  nlohmann::json state = driverGet("/v1/executors", gPki->tlsJson("server"));
  ASSERT_EQ(state["executors"].size(), 1u) << state;
  const std::string block_url = state["executors"][0]["block_url"].get<std::string>();
  EXPECT_EQ(block_url.rfind("https://127.0.0.1:", 0), 0u) << state;

  // `dockhand-driver fetch` reads an https:// URL with a config's tls section (its CA), and
  // says what it needs without one.
  ChildProcess fetch({driverBinary(), "fetch", block_url + "/v1/status", "--config",
                      (dir.path() / "driver.json").string()},
                     (dir.path() / "fetch.log").string());
  EXPECT_EQ(fetch.waitExit(15s), 0) << fetch.output();
  EXPECT_TRUE(contains(fetch.output(), "\"executor_id\": \"a1\"")) << fetch.output();
  ChildProcess no_tls({driverBinary(), "fetch", block_url + "/v1/status"},
                      (dir.path() / "fetch-no-tls.log").string());
  EXPECT_EQ(no_tls.waitExit(15s), 2) << no_tls.output();
  EXPECT_TRUE(contains(no_tls.output(), "give --config FILE with the cluster's tls section"))
      << no_tls.output();

  // `dockhand-driver decommission` reaches the https:// control API with the driver's config
  // (its tls section), and not without it.
  const std::string at = "127.0.0.1:" + std::to_string(port_);
  ChildProcess plain({driverBinary(), "decommission", "a1", "--driver", at},
                     (dir.path() / "plain-command.log").string());
  EXPECT_EQ(plain.waitExit(15s), 1) << plain.output();
  ChildProcess command({driverBinary(), "decommission", "a1", "--driver", at, "--config",
                        (dir.path() / "driver.json").string()},
                       (dir.path() / "command.log").string());
  EXPECT_EQ(command.waitExit(15s), 0) << command.output();
  EXPECT_TRUE(contains(command.output(), "a1 is decommissioning")) << command.output();
  EXPECT_EQ(agent->waitExit(20s), 0) << agent->output();
}

TEST_F(TlsTest, AgentTrustingAnotherCaRefusesTheDriver) {
  auto driver = startDriver(gPki->tlsJson("server"));
  auto agent = startAgent("a1", writeConfig("agent.json", gPki->tlsJson("server", "other-ca")));
  EXPECT_EQ(agent->waitExit(15s), toInt(ExitCode::kBootstrapFailed)) << agent->output();
  EXPECT_TRUE(contains(agent->output(), "TLS handshake with the driver failed")) << agent->output();
  EXPECT_TRUE(contains(agent->output(), "certificate verify failed")) << agent->output();
  EXPECT_TRUE(contains(agent->output(), "not signed by a CA in tls.ca_file")) << agent->output();
  // The driver says why the connection went: the agent refused its certificate.
  EXPECT_TRUE(waitUntil(
      [&] { return contains(driver->output(), "TLS handshake failed: SSL Exception"); }, 5s))
      << driver->output();
  EXPECT_TRUE(contains(driver->output(), "unknown ca")) << driver->output();
  EXPECT_TRUE(driverGet("/v1/executors", gPki->tlsJson("server"))["executors"].empty());
}

TEST_F(TlsTest, DriverCertificateForAnotherHostIsRefused) {
  auto driver = startDriver(gPki->tlsJson("wrong-host"));
  auto agent = startAgent("a1", writeConfig("agent.json", gPki->tlsJson("server")));
  EXPECT_EQ(agent->waitExit(15s), toInt(ExitCode::kBootstrapFailed)) << agent->output();
  EXPECT_TRUE(contains(agent->output(), "does not name the host connected to")) << agent->output();
  // The same certificate passes when host names are not checked (the chain still is).
  auto lax = startAgent(
      "a2", writeConfig("lax.json", gPki->tlsJson("server", "ca", R"("verify_hostname": false)")));
  EXPECT_TRUE(waitUntil([&] { return registered(*lax); }, 15s)) << lax->output();
}

TEST_F(TlsTest, PlainAgentAgainstAWssDriverFailsClearly) {
  auto driver = startDriver(gPki->tlsJson("server"));
  fs::path config = dir.path() / "plain.json";
  writeFile(config, R"({"connect_tries": 1})");
  auto agent = startAgent("a1", config, "ws");
  EXPECT_EQ(agent->waitExit(15s), toInt(ExitCode::kBootstrapFailed)) << agent->output();
  EXPECT_TRUE(contains(agent->output(), "if the driver serves wss://")) << agent->output();
  EXPECT_TRUE(
      waitUntil([&] { return contains(driver->output(), "the peer does not speak TLS here"); }, 5s))
      << driver->output();
  EXPECT_TRUE(driverGet("/v1/executors", gPki->tlsJson("server"))["executors"].empty());
}

TEST_F(TlsTest, WssAgentAgainstAPlainDriverFailsClearly) {
  auto driver = std::make_unique<ChildProcess>(
      std::vector<std::string>{driverBinary(), "serve", "--listen", "127.0.0.1:0", "--port-file",
                               port_file_.string()},
      (dir.path() / "driver.log").string());
  ASSERT_TRUE(
      waitUntil([&] { return fs::exists(port_file_) && !readFile(port_file_).empty(); }, 10s));
  port_ = std::stoi(readFile(port_file_));
  auto agent = startAgent("a1", writeConfig("agent.json", gPki->tlsJson("server")));
  EXPECT_EQ(agent->waitExit(15s), toInt(ExitCode::kBootstrapFailed)) << agent->output();
  EXPECT_TRUE(contains(agent->output(), "TLS handshake with the driver failed")) << agent->output();
  // The driver says why at once, instead of reading the handshake as an HTTP request.
  EXPECT_TRUE(contains(driver->output(), "the client started TLS, but this port serves plain"))
      << driver->output();
}

TEST_F(TlsTest, ClientCertificatesRequiredRefuseOthers) {
  auto driver = startDriver(gPki->tlsJson("server", "ca", R"("require_client_certificate": true)"));
  // A certificate from another CA is refused; one from the cluster's CA is welcome.
  auto stranger = startAgent("stranger", writeConfig("stranger.json", gPki->tlsJson("untrusted")));
  EXPECT_EQ(stranger->waitExit(15s), toInt(ExitCode::kBootstrapFailed)) << stranger->output();
  EXPECT_TRUE(contains(stranger->output(), "TLS handshake with the driver failed"))
      << stranger->output();
  EXPECT_TRUE(waitUntil(
      [&] { return contains(driver->output(), "refused a connection from 127.0.0.1:"); }, 5s))
      << driver->output();
  auto member = startAgent("member", writeConfig("member.json", gPki->tlsJson("server")));
  EXPECT_TRUE(waitUntil([&] { return registered(*member); }, 15s)) << member->output();
  // A client with no certificate at all gets no answer from the control API either.
  const std::string no_certificate = R"({"ca_file": ")" + gPki->cert("ca") + "\"}";
  EXPECT_THROW(driverGet("/v1/executors", no_certificate), Poco::Exception);
  EXPECT_EQ(driverGet("/v1/executors", gPki->tlsJson("client"))["executors"].size(), 1u);
}

// ---- start-up refusals --------------------------------------------------------------------

TEST_F(TlsTest, UnusableCertificateOrKeyFilesAreConfigErrors) {
  port_ = unusedPort();
  fs::path readable_key = dir.path() / "readable.key";
  fs::copy_file(gPki->key("server"), readable_key);
  fs::permissions(readable_key, fs::perms::group_read | fs::perms::others_read,
                  fs::perm_options::add);
  fs::path encrypted_key = dir.path() / "encrypted.key";
  gPki->openssl({"pkey", "-in", gPki->key("server"), "-aes256", "-passout", "pass:x", "-out",
                 encrypted_key.string()});
  fs::permissions(encrypted_key, fs::perms::owner_read | fs::perms::owner_write);
  const fs::path missing = dir.path() / "missing.pem";
  struct Case {
    std::string tls;
    std::string expected;
  } cases[] = {
      {R"({"certificate_file": ")" + missing.string() + R"(", "private_key_file": ")" +
           gPki->key("server") + R"(", "ca_file": ")" + gPki->cert("ca") + "\"}",
       "tls.certificate_file " + missing.string() + ": cannot open: No such file or directory"},
      {R"({"certificate_file": ")" + gPki->key("server") + R"(", "private_key_file": ")" +
           gPki->key("server") + R"(", "ca_file": ")" + gPki->cert("ca") + "\"}",
       "holds no PEM certificate"},
      {R"({"certificate_file": ")" + gPki->cert("server") + R"(", "private_key_file": ")" +
           gPki->key("client") + R"(", "ca_file": ")" + gPki->cert("ca") + "\"}",
       "does not match the certificate"},
      {R"({"certificate_file": ")" + gPki->cert("server") + R"(", "private_key_file": ")" +
           readable_key.string() + R"(", "ca_file": ")" + gPki->cert("ca") + "\"}",
       "is accessible by group or others (mode 0644)"},
      {R"({"certificate_file": ")" + gPki->cert("server") + R"(", "private_key_file": ")" +
           encrypted_key.string() + R"(", "ca_file": ")" + gPki->cert("ca") + "\"}",
       "is encrypted with a passphrase"},
      {R"({"certificate_file": ")" + gPki->cert("server") + R"(", "private_key_file": ")" +
           gPki->key("server") + R"(", "ca_file": ")" + gPki->key("server") + "\"}",
       "tls.ca_file " + gPki->key("server") + ": holds no PEM certificate"},
  };
  int n = 0;
  for (const Case& c : cases) {
    auto agent = startAgent("bad-" + std::to_string(n),
                            writeConfig("bad-" + std::to_string(n) + ".json", c.tls));
    ++n;
    EXPECT_EQ(agent->waitExit(10s), toInt(ExitCode::kConfigError)) << c.tls << "\n"
                                                                   << agent->output();
    EXPECT_TRUE(contains(agent->output(), "dockhand: config error: tls.")) << agent->output();
    EXPECT_TRUE(contains(agent->output(), c.expected)) << c.expected << "\n" << agent->output();
  }
  // The driver refuses the same way.
  fs::path config = writeConfig("driver.json", cases[2].tls);
  ChildProcess driver(
      {driverBinary(), "serve", "--listen", "127.0.0.1:0", "--config", config.string()},
      (dir.path() / "bad-driver.log").string());
  EXPECT_EQ(driver.waitExit(10s), static_cast<int>(driver::DriverExit::kConfigError))
      << driver.output();
  EXPECT_TRUE(contains(driver.output(), "does not match the certificate")) << driver.output();
}

// TLS on but no usable TLS module (a package without it, a module of another version): the agent
// says so at start, as a config error naming each place it looked, and connects to nothing.
TEST_F(TlsTest, AnAgentWithoutItsTlsModuleSaysSoAtStart) {
  port_ = unusedPort();
  const fs::path config = writeConfig("agent.json", gPki->tlsJson("server"));
  const std::string missing = (dir.path() / "no-such-module.so").string();
  auto agent = startAgent("missing", config, "wss", {"DOCKHAND_TLS_MODULE=" + missing});
  EXPECT_EQ(agent->waitExit(10s), toInt(ExitCode::kConfigError)) << agent->output();
  EXPECT_TRUE(contains(agent->output(),
                       "TLS is on, but the TLS module (libdockhand-tls.so) "
                       "cannot be loaded: " +
                           missing + ": "))
      << agent->output();
  // A shared library that is not the TLS module (here: a plugin) is refused by name.
  const std::string plugin = std::string(DOCKHAND_PLUGIN_DIR) + "/dockhand-process.so";
  auto wrong = startAgent("wrong", config, "wss", {"DOCKHAND_TLS_MODULE=" + plugin});
  EXPECT_EQ(wrong->waitExit(10s), toInt(ExitCode::kConfigError)) << wrong->output();
  EXPECT_TRUE(contains(wrong->output(), plugin + ": not a Dockhand TLS module")) << wrong->output();
}

// ---- the block server and input fetches ---------------------------------------------------

class TlsBlocksTest : public TlsTest {
 protected:
  static tls::TlsConfig config(const std::string& name, const std::string& ca) {
    tls::TlsConfig c;
    c.enabled = true;
    c.certificate_file = gPki->cert(name);
    c.private_key_file = gPki->key(name);
    c.ca_file = gPki->cert(ca);
    return c;
  }

  // Serves one block over https; returns its input description.
  protocol::InputBlock serveBlock(agent::BlockStore& store, agent::BlockServer*& server_out) {
    fs::path source = dir.path() / "block.bin";
    writeFile(source, "hello over tls\n");
    store.adopt("rdd_1_0", source);
    agent::BlockServerOptions options;
    options.tls = tls::makeContext(config("server", "ca"), tls::Role::kServer);
    server_ = std::make_unique<agent::BlockServer>(options, store,
                                                   [] { return nlohmann::json::object(); });
    server_->start();
    server_out = server_.get();
    protocol::InputBlock input;
    input.id = "rdd_1_0";
    input.url = "https://127.0.0.1:" + std::to_string(server_->port()) + "/blocks/rdd_1_0";
    return input;
  }

  std::unique_ptr<agent::BlockServer> server_;
};

TEST_F(TlsBlocksTest, FetchesGoOverHttpsAndRefuseWhatDoesNotVerify) {
  agent::BlockStore store(dir.path() / "store");
  agent::BlockServer* server = nullptr;
  protocol::InputBlock input = serveBlock(store, server);
  std::atomic<bool> cancelled{false};
  const auto client = tls::makeContext(config("server", "ca"), tls::Role::kClient);

  agent::fetchBlock(input, dir.path() / "fetched", cancelled, std::chrono::seconds(5), {}, client);
  EXPECT_EQ(readFile(dir.path() / "fetched"), "hello over tls\n");

  // A client trusting another CA refuses the server.
  const auto stranger = tls::makeContext(config("server", "other-ca"), tls::Role::kClient);
  try {
    agent::fetchBlock(input, dir.path() / "refused", cancelled, std::chrono::seconds(5), {},
                      stranger);
    ADD_FAILURE() << "a server signed by an untrusted CA was accepted";
  } catch (const agent::FetchError& e) {
    EXPECT_TRUE(contains(e.what(), "certificate verify failed")) << e.what();
  }
  EXPECT_FALSE(fs::exists(dir.path() / "refused"));

  // A plain http:// fetch of the https:// server gets nothing.
  protocol::InputBlock plain = input;
  plain.url = "http://127.0.0.1:" + std::to_string(server->port()) + "/blocks/rdd_1_0";
  EXPECT_THROW(
      agent::fetchBlock(plain, dir.path() / "plain", cancelled, std::chrono::seconds(5), {}),
      agent::FetchError);
  // And an agent with TLS on does not fetch in clear text at all.
  try {
    agent::fetchBlock(plain, dir.path() / "plain", cancelled, std::chrono::seconds(5), {}, client);
    ADD_FAILURE() << "a plain http:// fetch was made with TLS on";
  } catch (const agent::FetchError& e) {
    EXPECT_TRUE(contains(e.what(), "refusing a plain http:// fetch")) << e.what();
  }
}

// ---- a job on local agents ----------------------------------------------------------------

// `dockhand-driver run` with TLS on starts its local agents with the driver's TLS files: the
// job's second task fetches the first one's output block over https://.
TEST_F(TlsTest, LocalAgentsRunAJobOverTls) {
  const fs::path example = fs::path(DOCKHAND_SOURCE_DIR) / "examples" / "decommission";
  const fs::path data = fs::path(DOCKHAND_SOURCE_DIR) / "examples" / "wordcount" / "data";
  long words = 0;
  for (const char* part : {"part-1.txt", "part-2.txt"}) {
    std::ifstream in(data / part);
    std::string word;
    while (in >> word) ++words;
  }
  fs::path job = dir.path() / "job.json";
  writeFile(job,
            "{\"name\": \"tls\", \"aggregate\": \"sum\", \"tasks\": [\n"
            R"({"name": "map-0", "shell": "sh ')" +
                (example / "map.sh").string() + "' '" + (data / "part-1.txt").string() +
                R"(' 0 1", "env": {"MAP_SECONDS": "0"}, "outputs": )"
                "[\"shuffle_0_0_0\"]},\n"
                R"({"name": "map-1", "shell": "sh ')" +
                (example / "map.sh").string() + "' '" + (data / "part-2.txt").string() +
                R"(' 1 1", "env": {"MAP_SECONDS": "0"}, "outputs": )"
                "[\"shuffle_0_1_0\"]},\n"
                R"({"name": "reduce-0", "shell": "sh ')" +
                (example / "reduce.sh").string() +
                "' 0 2\", \"inputs\": [\"shuffle_0_0_0\", \"shuffle_0_1_0\"]}]}\n");
  fs::path config = writeConfig("driver.json", gPki->tlsJson("server"));
  ChildProcess driver({driverBinary(), "run", job.string(), "--config", config.string(),
                       "--local-agents", "2", "--timeout", "60", "--keep-work-dirs"},
                      (dir.path() / "run.log").string());
  ASSERT_EQ(driver.waitExit(90s), 0) << driver.output();
  EXPECT_TRUE(contains(driver.output(), "job tls SUCCEEDED")) << driver.output();
  EXPECT_TRUE(contains(driver.output(), "sum=" + std::to_string(words))) << driver.output();
}

}  // namespace
}  // namespace dockhand::testing
