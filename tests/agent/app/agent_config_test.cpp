#include "app/agent_config.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include <spdlog/spdlog.h>

#include "app/log_setup.h"
#include "dockhand/base/logging.h"

namespace dockhand::agent {
namespace {

std::string errorOf(const std::string& text) {
  AgentConfig config;
  try {
    loadConfigJson(text, "agent.json", config);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(AgentConfigTest, ReadsEveryKey) {
  AgentConfig config;
  loadConfigJson(R"({
    "driver_url": "ws://d:1/", "executor_id": "e", "bind_address": "0.0.0.0",
    "hostname": "h", "cores": 4, "resources_file": "/r.json", "app_id": "a",
    "worker_url": "tcp://w:2", "resource_profile_id": 3, "work_dir": "/w",
    "log_level": "debug", "plugin_dirs": ["/p"], "connect_tries": 5,
    "connect_retry_delay_ms": 10, "ask_timeout_ms": 20, "stop_grace_ms": 30,
    "restart_wait_ms": 40, "max_frame_bytes": 65536, "keep_task_dirs": 7,
    "plugins": [{"name": "process", "config": {"kill_grace_ms": 1}},
                {"path": "/x/dockhand-y.so", "required": false}]})",
                 "agent.json", config);
  EXPECT_EQ(config.driver_url, "ws://d:1/");
  EXPECT_EQ(config.executor_id, "e");
  EXPECT_EQ(config.bind_address, "0.0.0.0");
  EXPECT_EQ(config.hostname, "h");
  EXPECT_EQ(config.cores, 4);
  EXPECT_EQ(config.resources_file, "/r.json");
  EXPECT_EQ(config.app_id, "a");
  EXPECT_EQ(config.worker_url, "tcp://w:2");
  EXPECT_EQ(config.resource_profile_id, 3);
  EXPECT_EQ(config.work_dir, "/w");
  EXPECT_EQ(config.log_level, "debug");
  EXPECT_EQ(config.plugin_dirs, std::vector<std::string>{"/p"});
  EXPECT_EQ(config.connect_tries, 5);
  EXPECT_EQ(config.connect_retry_delay_ms, 10);
  EXPECT_EQ(config.ask_timeout_ms, 20);
  EXPECT_EQ(config.stop_grace_ms, 30);
  EXPECT_EQ(config.restart_wait_ms, 40);
  EXPECT_EQ(config.max_frame_bytes, 65536);
  EXPECT_EQ(config.keep_task_dirs, 7);
  ASSERT_EQ(config.plugins.size(), 2u);
  EXPECT_EQ(config.plugins[0].name, "process");
  EXPECT_EQ(config.plugins[0].config["kill_grace_ms"], 1);
  EXPECT_TRUE(config.plugins[0].required);
  EXPECT_EQ(config.plugins[1].path, "/x/dockhand-y.so");
  EXPECT_FALSE(config.plugins[1].required);
}

TEST(AgentConfigTest, DefaultsLoadTheProcessRunner) {
  AgentConfig config;
  ASSERT_EQ(config.plugins.size(), 1u);
  EXPECT_EQ(config.plugins[0].name, "process");
  EXPECT_EQ(config.connect_tries, 3);
  EXPECT_EQ(config.keep_task_dirs, 100);
}

TEST(AgentConfigTest, UnknownKeyIsAnErrorNamingFileAndPath) {
  std::string error = errorOf(R"({"cores": 2, "coress": 3})");
  EXPECT_NE(error.find("agent.json: /coress: unknown key"), std::string::npos) << error;
}

TEST(AgentConfigTest, WrongTypeNamesThePath) {
  EXPECT_NE(errorOf(R"({"cores": "four"})").find("agent.json: /cores: expected an integer"),
            std::string::npos);
  EXPECT_NE(errorOf(R"({"plugins": [{"name": "p", "config": []}]})")
                .find("/plugins/0/config: expected an object"),
            std::string::npos);
  EXPECT_NE(errorOf(R"({"plugin_dirs": ["/a", 3]})").find("/plugin_dirs/1"), std::string::npos);
}

TEST(AgentConfigTest, TlsSectionIsReadAndMerged) {
  AgentConfig config;
  EXPECT_FALSE(config.tls.enabled);
  loadConfigJson(R"({"tls": {"certificate_file": "/c.pem", "private_key_file": "/k.pem",
                             "ca_file": "/ca.pem", "require_client_certificate": true}})",
                 "a.json", config);
  EXPECT_TRUE(config.tls.enabled);  // a tls section is on unless it says otherwise
  EXPECT_EQ(config.tls.certificate_file, "/c.pem");
  EXPECT_EQ(config.tls.private_key_file, "/k.pem");
  EXPECT_EQ(config.tls.ca_file, "/ca.pem");
  EXPECT_TRUE(config.tls.require_client_certificate);
  EXPECT_TRUE(config.tls.verify_hostname);
  // A later file changes only the keys it holds.
  loadConfigJson(R"({"tls": {"verify_hostname": false}})", "b.json", config);
  EXPECT_EQ(config.tls.ca_file, "/ca.pem");
  EXPECT_FALSE(config.tls.verify_hostname);
  EXPECT_EQ(configToJson(config)["tls"]["certificate_file"], "/c.pem");
}

TEST(AgentConfigTest, TlsSectionErrorsNameThePath) {
  std::string error = errorOf(R"({"tls": {"ca": "/ca.pem"}})");
  EXPECT_NE(error.find("agent.json: /tls/ca: unknown key (known keys: "), std::string::npos)
      << error;
  EXPECT_NE(errorOf(R"({"tls": {"enabled": "yes"}})").find("/tls/enabled: expected true or false"),
            std::string::npos)
      << errorOf(R"({"tls": {"enabled": "yes"}})");
  EXPECT_NE(errorOf(R"({"tls": {"ca_file": 3}})").find("/tls/ca_file"), std::string::npos);
  EXPECT_NE(errorOf(R"({"tls": true})").find("/tls: expected an object"), std::string::npos);
}

// The whole-config rules: the files TLS needs, and a driver URL whose scheme agrees.
std::vector<std::string> checkProblems(const std::string& text) {
  AgentConfig config;
  ConfigOrigins origins;
  loadConfigJson(text, "agent.json", config, &origins);
  std::vector<std::string> out;
  for (const auto& p : checkConfig(config, origins)) out.push_back(p.text());
  return out;
}

TEST(AgentConfigTest, TlsNeedsItsFilesAndAWssDriverUrl) {
  const std::string base = R"("executor_id": "e", "app_id": "a", )";
  auto problems = checkProblems("{" + base + R"("driver_url": "ws://d:1/", "tls": {}})");
  ASSERT_EQ(problems.size(), 3u) << ::testing::PrintToString(problems);
  EXPECT_NE(problems[0].find("/driver_url: is 'ws://d:1/', but tls is on"), std::string::npos)
      << problems[0];
  EXPECT_NE(problems[1].find("agent.json: /tls/ca_file: is required with TLS on"),
            std::string::npos)
      << problems[1];
  EXPECT_NE(problems[2].find("/tls/certificate_file: is required with TLS on"), std::string::npos)
      << problems[2];

  problems = checkProblems("{" + base + R"("driver_url": "wss://d:1/", "tls": {
      "certificate_file": "/c", "ca_file": "/ca"}})");
  ASSERT_EQ(problems.size(), 1u) << ::testing::PrintToString(problems);
  EXPECT_NE(problems[0].find("/tls/private_key_file: goes with the other"), std::string::npos)
      << problems[0];

  problems = checkProblems("{" + base + R"("driver_url": "wss://d:1/"})");
  ASSERT_EQ(problems.size(), 1u) << ::testing::PrintToString(problems);
  EXPECT_NE(problems[0].find("a wss:// URL, but tls is off"), std::string::npos) << problems[0];

  EXPECT_TRUE(checkProblems("{" + base + R"("driver_url": "wss://d:1/", "tls": {
      "certificate_file": "/c", "private_key_file": "/k", "ca_file": "/ca"}})")
                  .empty());
  EXPECT_TRUE(checkProblems("{" + base + R"("driver_url": "ws://d:1/", "tls": {
      "enabled": false}})")
                  .empty());
}

TEST(AgentConfigTest, OutOfRangeValuesAreRefused) {
  EXPECT_NE(errorOf(R"({"cores": 0})").find("/cores: 0 is out of range"), std::string::npos);
  EXPECT_NE(errorOf(R"({"connect_tries": 0})").find("/connect_tries"), std::string::npos);
}

TEST(AgentConfigTest, TheRestartSignalCannotDecommission) {
  EXPECT_EQ(errorOf(R"({"decommission": {"signal": "SIGUSR1"}})"), "");
  for (const char* name : {"SIGUSR2", "USR2"}) {
    const std::string error =
        errorOf(std::string(R"({"decommission": {"signal": ")") + name + R"("}})");
    EXPECT_NE(error.find("/decommission/signal"), std::string::npos) << error;
    EXPECT_NE(error.find("SIGUSR2 is the restart in place"), std::string::npos) << error;
  }
}

TEST(AgentConfigTest, InvalidJsonNamesTheLine) {
  std::string error = errorOf("{\n  \"cores\": 2,\n  oops\n}");
  EXPECT_NE(error.find("agent.json: line 3: invalid JSON"), std::string::npos) << error;
}

// Found by the agent_config and resources_file fuzz targets: a number too large for a double
// made the JSON parser throw out_of_range, which is no parse_error, so it escaped the loaders
// as an exception that is no ConfigError and names no file.
TEST(AgentConfigTest, NumberTooLargeForADoubleIsAConfigError) {
  AgentConfig config;
  try {
    loadConfigJson(R"({"cores": 1e600})", "agent.json", config);
    FAIL() << "accepted";
  } catch (const ConfigError& e) {
    ASSERT_EQ(e.problems().size(), 1u);
    EXPECT_EQ(e.problems()[0].origin, "agent.json");
    EXPECT_NE(e.problems()[0].message.find("number overflow"), std::string::npos) << e.what();
  }
}

// A file that is not JSON is one problem whose origin is the file (not a message that merely
// starts with its name), like every other config problem.
TEST(AgentConfigTest, InvalidJsonProblemHasTheFileAsOrigin) {
  AgentConfig config;
  try {
    loadConfigJson("", "agent.json", config);
    FAIL() << "accepted";
  } catch (const ConfigError& e) {
    ASSERT_EQ(e.problems().size(), 1u);
    EXPECT_EQ(e.problems()[0].origin, "agent.json");
    EXPECT_EQ(e.problems()[0].message.rfind("line 1: invalid JSON", 0), 0u) << e.what();
  }
}

TEST(AgentConfigTest, TopLevelMustBeAnObject) {
  EXPECT_NE(errorOf("[1, 2]").find("agent.json: /: expected an object"), std::string::npos);
}

TEST(AgentConfigTest, PluginEntryNeedsNameOrPath) {
  EXPECT_NE(errorOf(R"({"plugins": [{"required": true}]})").find("/plugins/0: a plugin entry"),
            std::string::npos);
  EXPECT_NE(errorOf(R"({"plugins": [{"name": "x", "extra": 1}]})").find("/plugins/0/extra"),
            std::string::npos);
}

TEST(AgentConfigTest, MigrationEntriesAreNamesOrNamesWithAConfig) {
  AgentConfig config;
  loadConfigJson(
      R"({"decommission": {"migration": ["peer", {"name": "dav", "config": {"url": "http://s/"}}]}})",
      "agent.json", config);
  ASSERT_EQ(config.decommission.migration.size(), 2u);
  EXPECT_EQ(config.decommission.migration[0].name, "peer");
  EXPECT_TRUE(config.decommission.migration[0].config.is_null());
  EXPECT_EQ(config.decommission.migration[1].name, "dav");
  EXPECT_EQ(config.decommission.migration[1].config, nlohmann::json({{"url", "http://s/"}}));
  // The default is the peer plugin alone.
  EXPECT_EQ(AgentConfig{}.decommission.migration.size(), 1u);
}

TEST(AgentConfigTest, BadMigrationEntriesNameTheirPath) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"decommission": {"migration": "peer"}})", "/decommission/migration: expected an array"},
      {R"({"decommission": {"migration": [""]}})", "/decommission/migration/0: expected a plugin"},
      {R"({"decommission": {"migration": [7]}})", "/decommission/migration/0: expected a plugin"},
      {R"({"decommission": {"migration": [{"config": {}}]}})",
       "/decommission/migration/0: a migration entry needs a name"},
      {R"({"decommission": {"migration": [{"name": ""}]}})",
       "/decommission/migration/0/name: must not be empty"},
      {R"({"decommission": {"migration": [{"name": "x", "config": 1}]}})",
       "/decommission/migration/0/config: expected an object"},
      {R"({"decommission": {"migration": [{"name": "x", "path": "/x.so"}]}})",
       "/decommission/migration/0/path: unknown key"},
  };
  for (const auto& [text, expected] : cases) {
    const std::string error = errorOf(text);
    EXPECT_NE(error.find(expected), std::string::npos) << text << " -> " << error;
  }
}

TEST(AgentConfigTest, MissingFileIsAClearError) {
  AgentConfig config;
  try {
    loadConfigFile("/nonexistent/agent.json", config);
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/agent.json: cannot read"),
              std::string::npos);
  }
}

TEST(AgentConfigTest, CommandLineOptionsOverrideTheFile) {
  AgentConfig config;
  loadConfigJson(R"({"cores": 2, "executor_id": "file"})", "agent.json", config);
  applyOption("cores", "8", config);
  applyOption("executor-id", "cli", config);
  applyOption("plugin-dir", "/a", config);
  applyOption("plugin-dir", "/b", config);
  applyOption("resourceProfileId", "2", config);
  EXPECT_EQ(config.cores, 8);
  EXPECT_EQ(config.executor_id, "cli");
  EXPECT_EQ(config.plugin_dirs, (std::vector<std::string>{"/a", "/b"}));
  EXPECT_EQ(config.resource_profile_id, 2);
}

TEST(AgentConfigTest, BadOptionValuesNameTheOption) {
  AgentConfig config;
  try {
    applyOption("cores", "many", config);
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_STREQ(e.what(), "--cores: expected an integer >= 1, got 'many'");
  }
  EXPECT_THROW(applyOption("cores", "0", config), ConfigError);
  EXPECT_THROW(applyOption("cores", "3x", config), ConfigError);
}

TEST(AgentConfigTest, EnvironmentGivesLogUrlsAndAttributes) {
  AgentConfig config;
  applyEnvironment({"DOCKHAND_LOG_URL_STDOUT=http://h/out", "SPARK_LOG_URL_STDERR=http://h/err",
                    "DOCKHAND_EXECUTOR_ATTRIBUTE_rack=r1", "SPARK_EXECUTOR_ATTRIBUTE_ZONE=z",
                    "SPARK_LOG_URL_STDOUT=http://spark/out", "PATH=/bin", "BROKEN"},
                   config);
  EXPECT_EQ(config.log_urls.at("stdout"), "http://h/out");  // DOCKHAND_ wins over SPARK_
  EXPECT_EQ(config.log_urls.at("stderr"), "http://h/err");
  EXPECT_EQ(config.attributes.at("RACK"), "r1");
  EXPECT_EQ(config.attributes.at("ZONE"), "z");
  EXPECT_EQ(config.log_urls.size(), 2u);
}

TEST(AgentConfigTest, DefaultsFollowTheSeed) {
  AgentConfig config;
  config.app_id = "app";
  config.executor_id = "e1";
  applyDefaults(config);
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  EXPECT_EQ(config.hostname, host);
  EXPECT_EQ(config.bind_address, config.hostname);  // bind address defaults to the hostname
  EXPECT_NE(config.work_dir.find("dockhand/app/e1"), std::string::npos);

  AgentConfig explicit_host;
  explicit_host.hostname = "node-3";
  applyDefaults(explicit_host);
  EXPECT_EQ(explicit_host.bind_address, "node-3");
}

TEST(AgentConfigTest, RequiredOptionsAreTheSeeds) {
  AgentConfig config;
  EXPECT_EQ(missingRequired(config),
            (std::vector<std::string>{"--driver-url", "--executor-id", "--app-id"}))
      << "without --cores the agent offers the host's effective CPU count";
  config.driver_url = "ws://d:1/";
  config.executor_id = "e";
  config.app_id = "a";
  EXPECT_TRUE(missingRequired(config).empty());
}

TEST(AgentConfigTest, ShippedExampleConfigLoads) {
  AgentConfig config;
  loadConfigFile(std::string(DOCKHAND_SOURCE_DIR) + "/configs/agent.example.json", config);
  EXPECT_EQ(config.cores, 8);
  EXPECT_TRUE(missingRequired(config).empty());
}

TEST(LogLevelTest, AcceptsSpdlogAndLog4jNames) {
  EXPECT_EQ(parseLogLevel("INFO"), spdlog::level::info);
  EXPECT_EQ(parseLogLevel("warn"), spdlog::level::warn);
  EXPECT_EQ(parseLogLevel("WARNING"), spdlog::level::warn);
  EXPECT_EQ(parseLogLevel("fatal"), spdlog::level::critical);
  EXPECT_EQ(parseLogLevel("ALL"), spdlog::level::trace);
  EXPECT_EQ(parseLogLevel("off"), spdlog::level::off);
  EXPECT_FALSE(parseLogLevel("loud").has_value());
}

TEST(LogLevelTest, ControlChangesTheLevelOfEveryLogger) {
  SpdlogLevelControl control;
  auto named = logger("level-test");
  EXPECT_TRUE(control.setLevel("error"));
  EXPECT_EQ(named->level(), spdlog::level::err);
  EXPECT_FALSE(control.setLevel("nonsense"));
  EXPECT_EQ(named->level(), spdlog::level::err);
  control.setLevel("info");
  spdlog::drop("level-test");
}

}  // namespace
}  // namespace dockhand::agent
