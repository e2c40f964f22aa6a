#include "dockhand/driver/driver_config.h"

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

namespace dockhand::driver {
namespace {

TEST(DriverConfigTest, DefaultsWhenEmpty) {
  DriverConfig c = parseDriverConfig(Json::object(), "driver.json");
  EXPECT_EQ(c.agent_timeout_ms, 60000);
  EXPECT_EQ(c.agent_reconnect_grace_ms, 30000);
  EXPECT_EQ(c.heartbeat_interval_ms, 10000);
  EXPECT_EQ(c.max_attempts, 4);
  EXPECT_EQ(c.launch_ahead, defaults::kLaunchAheadAuto) << "ahead only while tasks prove short";
  EXPECT_EQ(c.max_frame_bytes, protocol::kDefaultMaxFrameBytes);
  EXPECT_GE(c.server_threads, 256);
  EXPECT_EQ(c.result_fetch_timeout_ms, 30000);
  EXPECT_EQ(c.max_result_bytes, std::uint64_t{1} << 30);
}

TEST(DriverConfigTest, ReadsEveryKey) {
  DriverConfig c = parseDriverConfig(Json::parse(R"({
    "properties": {"dockhand.driver.timeout_ms": "30000"}, "log_level": "debug",
    "resource_profile": {"id": 0, "executor_resources": {"gpu": {"amount": 2}},
                         "task_resources": {"gpu": 1}},
    "agent_timeout_ms": 5000, "agent_reconnect_grace_ms": 0, "heartbeat_interval_ms": 500,
    "max_attempts": 2, "launch_ahead": 8,
    "max_frame_bytes": 65536, "server_threads": 64, "hello_timeout_ms": 2000,
    "max_queued_frames": 1000, "result_fetch_timeout_ms": 1500, "max_result_bytes": 4096})"),
                                     "driver.json");
  EXPECT_EQ(c.properties.at("dockhand.driver.timeout_ms"), "30000");
  EXPECT_EQ(c.log_level, "debug");
  EXPECT_EQ(c.resource_profile.executor_resources.at("gpu").amount, 2);
  EXPECT_EQ(c.agent_timeout_ms, 5000);
  EXPECT_EQ(c.agent_reconnect_grace_ms, 0) << "0 is allowed: nobody is held";
  EXPECT_EQ(c.heartbeat_interval_ms, 500);
  EXPECT_EQ(c.max_attempts, 2);
  EXPECT_EQ(c.launch_ahead, 8);
  EXPECT_EQ(c.max_frame_bytes, 65536u);
  EXPECT_EQ(c.server_threads, 64);
  EXPECT_EQ(c.result_fetch_timeout_ms, 1500);
  EXPECT_EQ(c.max_result_bytes, 4096u);
}

std::string configErrorOf(const std::string& text) {
  try {
    parseDriverConfig(Json::parse(text), "conf/driver.json");
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "no error";
}

TEST(DriverConfigTest, UnknownKeysAndBadValuesNameFileAndPath) {
  EXPECT_EQ(configErrorOf(R"({"agent_timeout": 1})")
                .rfind("conf/driver.json: /agent_timeout: unknown key", 0),
            0u);
  EXPECT_NE(configErrorOf(R"({"max_attempts": 0})").find("/max_attempts"), std::string::npos);
  EXPECT_NE(configErrorOf(R"({"log_level": "loud"})").find("/log_level"), std::string::npos);
  EXPECT_NE(configErrorOf(R"({"resource_profile": {"executor_resources": {"gpu": {}}}})")
                .find("/resource_profile/executor_resources/gpu/amount"),
            std::string::npos)
      << configErrorOf(R"({"resource_profile": {"executor_resources": {"gpu": {}}}})");
  EXPECT_NE(configErrorOf(R"({"heartbeat_interval_ms": 9000, "agent_timeout_ms": 5000})")
                .find("/heartbeat_interval_ms"),
            std::string::npos);
  EXPECT_NE(configErrorOf(R"({"properties": {"a": 1}})").find("/properties/a"), std::string::npos);
  EXPECT_NE(configErrorOf(R"({"agent_reconnect_grace_ms": -1})").find("/agent_reconnect_grace_ms"),
            std::string::npos);
  EXPECT_NE(configErrorOf(R"({"launch_ahead": "always"})").find("/launch_ahead: expected \"auto\""),
            std::string::npos)
      << configErrorOf(R"({"launch_ahead": "always"})");
  EXPECT_NE(configErrorOf(R"({"launch_ahead": -1})").find("/launch_ahead"), std::string::npos);
}

TEST(DriverConfigTest, LaunchAheadIsANumberOrAuto) {
  EXPECT_EQ(parseDriverConfig(Json::parse(R"({"launch_ahead": "auto"})"), "d.json").launch_ahead,
            defaults::kLaunchAheadAuto);
  EXPECT_EQ(parseDriverConfig(Json::parse(R"({"launch_ahead": 0})"), "d.json").launch_ahead, 0);
}

TEST(DriverConfigTest, TlsSectionIsReadAndChecked) {
  DriverConfig off = parseDriverConfig(Json::object(), "driver.json");
  EXPECT_FALSE(off.tls.enabled);
  loadTlsContexts(off);
  EXPECT_TRUE(off.tls_server.isNull());
  DriverConfig on =
      parseDriverConfig(Json::parse(R"({"tls": {"certificate_file": "/c", "private_key_file": "/k",
                              "ca_file": "/ca", "require_client_certificate": true}})"),
                        "driver.json");
  EXPECT_TRUE(on.tls.enabled);
  EXPECT_EQ(on.tls.ca_file, "/ca");
  EXPECT_TRUE(on.tls.require_client_certificate);
  // The files are read when the contexts are made: a missing one is a config error.
  try {
    loadTlsContexts(on);
    ADD_FAILURE() << "missing TLS files were accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("tls.certificate_file /c: cannot open"), std::string::npos)
        << e.what();
  }
  EXPECT_NE(configErrorOf(R"({"tls": {"ca_file": "/ca"}})")
                .find("conf/driver.json: /tls/certificate_file: is required with TLS on"),
            std::string::npos)
      << configErrorOf(R"({"tls": {"ca_file": "/ca"}})");
  EXPECT_NE(configErrorOf(R"({"tls": {"certificate_file": "/c", "private_key_file": "/k"}})")
                .find("/tls/ca_file: is required"),
            std::string::npos);
  EXPECT_NE(configErrorOf(R"({"tls": {"cert": "/c"}})").find("/tls/cert: unknown key"),
            std::string::npos);
  EXPECT_NE(configErrorOf(R"({"tls": {"verify_hostname": 1}})").find("/tls/verify_hostname"),
            std::string::npos);
  EXPECT_EQ(configErrorOf(R"({"tls": {"enabled": false}})"), "no error");
}

TEST(DriverConfigTest, ShippedExampleConfigParses) {
  DriverConfig c = loadDriverConfig(std::string(DOCKHAND_SOURCE_DIR) + "/examples/driver.json");
  EXPECT_GT(c.agent_timeout_ms, c.heartbeat_interval_ms);
  DriverConfig tls =
      loadDriverConfig(std::string(DOCKHAND_SOURCE_DIR) + "/examples/driver-tls.json");
  EXPECT_TRUE(tls.tls.enabled);
  EXPECT_TRUE(tls.tls.require_client_certificate);
}

TEST(DriverConfigTest, AuthSecretFileIsReadAndCheckedWhenLoaded) {
  char templ[] = "/tmp/dockhand-driver-config-XXXXXX";
  ASSERT_NE(::mkdtemp(templ), nullptr);
  const std::filesystem::path dir = templ;
  const std::string file = (dir / "secret").string();
  std::ofstream(file) << "a-driver-config-test-secret\n";
  std::filesystem::permissions(
      file, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  DriverConfig c = parseDriverConfig(Json{{"auth_secret_file", file}}, "driver.json");
  EXPECT_EQ(c.auth_secret_file, file);
  EXPECT_FALSE(c.secret.has_value()) << "parsing never reads the secret";
  loadClusterSecret(c);
  EXPECT_TRUE(c.secret.has_value());

  std::filesystem::permissions(file, std::filesystem::perms::group_read,
                               std::filesystem::perm_options::add);
  DriverConfig open_file = parseDriverConfig(Json{{"auth_secret_file", file}}, "driver.json");
  try {
    loadClusterSecret(open_file);
    ADD_FAILURE() << "a secret file the group can read was accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("group or others"), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).find("a-driver-config-test-secret"), std::string::npos);
  }
  EXPECT_NE(configErrorOf(R"({"auth_secret_file": ""})").find("/auth_secret_file"),
            std::string::npos);
  EXPECT_NE(configErrorOf(R"({"auth_secret_file": 3})").find("/auth_secret_file"),
            std::string::npos);
  DriverConfig none = parseDriverConfig(Json::object(), "driver.json");
  loadClusterSecret(none);
  EXPECT_FALSE(none.secret.has_value());
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace dockhand::driver
