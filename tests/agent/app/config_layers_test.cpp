// Layered config (files + fragments, environment overrides, command line), error collection,
// provenance, redaction and the `dockhand config` subcommand.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "app/agent_config.h"
#include "app/config_command.h"

namespace dockhand::agent {
namespace {

namespace fs = std::filesystem;

class ConfigLayersTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("dockhand-config-test-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string write(const std::string& name, const std::string& text) {
    fs::path path = dir_ / name;
    fs::create_directories(path.parent_path());
    std::ofstream(path) << text;
    return path.string();
  }

  fs::path dir_;
};

constexpr const char* kBase =
    R"({"driver_url": "ws://driver:7077/", "app_id": "app", "executor_id": "e1", "cores": 2})";

TEST_F(ConfigLayersTest, FragmentsMergeInNameOrderAfterTheFile) {
  std::string file = write("agent.json", kBase);
  write("agent.d/20-cores.json", R"({"cores": 8, "plugin_dirs": ["/b"]})");
  write("agent.d/10-first.json",
        R"({"cores": 4, "plugin_dirs": ["/a", "/x"], "log_level": "debug"})");
  write("agent.d/notes.txt", "not a fragment");
  EXPECT_EQ(configFilesFor(file),
            (std::vector<std::string>{file, (dir_ / "agent.d/10-first.json").string(),
                                      (dir_ / "agent.d/20-cores.json").string()}));
  AgentConfig config;
  ConfigOrigins origins;
  loadConfig(ConfigSources{{file}, {}, {}}, config, &origins);
  EXPECT_EQ(config.cores, 8);
  EXPECT_EQ(config.plugin_dirs, std::vector<std::string>{"/b"});  // arrays are replaced
  EXPECT_EQ(config.log_level, "debug");
  EXPECT_EQ(origins["/cores"], "file:" + (dir_ / "agent.d/20-cores.json").string());
  EXPECT_EQ(origins["/driver_url"], "file:" + file);
}

TEST_F(ConfigLayersTest, EnvironmentOverridesFilesAndTheCommandLineOverridesBoth) {
  std::string file = write("agent.json", kBase);
  AgentConfig config;
  ConfigOrigins origins;
  loadConfig(ConfigSources{{file},
                           {"DOCKHAND_CORES=6", "DOCKHAND_EXECUTOR_ID=from-env", "PATH=/bin"},
                           {{"cores", "12"}}},
             config, &origins);
  EXPECT_EQ(config.cores, 12);
  EXPECT_EQ(config.executor_id, "from-env");
  EXPECT_EQ(origins["/cores"], "cli");
  EXPECT_EQ(origins["/executor_id"], "env:DOCKHAND_EXECUTOR_ID");
}

TEST_F(ConfigLayersTest, EveryProblemOfEveryFileIsReported) {
  std::string file = write("agent.json", R"({
    "driver_url": "ws://driver:7077/", "app_id": "app", "executor_id": "e1",
    "cores": 0, "stop_grace_ms": "5s", "colour": "blue",
    "plugins": [{"name": "process", "required": "yes"}, 3]})");
  write("agent.d/10.json", R"({"connect_tries": 0})");
  AgentConfig config;
  try {
    loadConfig(ConfigSources{{file}, {"DOCKHAND_CORES=lots"}, {}}, config);
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    std::vector<std::string> where;
    for (const auto& p : e.problems()) where.push_back(p.origin + " " + p.path);
    std::string fragment = (dir_ / "agent.d/10.json").string();
    EXPECT_EQ(where, (std::vector<std::string>{
                         file + " /colour", file + " /cores", file + " /stop_grace_ms",
                         file + " /plugins/0/required", file + " /plugins/1",
                         fragment + " /connect_tries", "env:DOCKHAND_CORES "}))
        << e.what();
  }
}

TEST_F(ConfigLayersTest, WholeConfigRulesNameTheSourceOfTheValue) {
  std::string file = write("agent.json", R"({"driver_url": "http://driver:7077/", "cores": 1,
                                             "app_id": "a", "log_level": "loud",
                                             "log_format": "xml"})");
  AgentConfig config;
  try {
    loadConfig(ConfigSources{{file}, {}, {}}, config);
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    std::string what = e.what();
    EXPECT_NE(what.find(file + ": /executor_id: is required"), std::string::npos) << what;
    EXPECT_NE(what.find(file + ": /driver_url: expected ws://HOST:PORT/"), std::string::npos)
        << what;
    EXPECT_NE(what.find(file + ": /log_level: unknown level 'loud'"), std::string::npos) << what;
    EXPECT_NE(what.find(file + ": /log_format: unknown format 'xml' (text or json)"),
              std::string::npos)
        << what;
  }
}

TEST_F(ConfigLayersTest, LogFormatComesFromTheFileTheEnvironmentOrTheCommandLine) {
  std::string file = write("agent.json", R"({"driver_url": "ws://driver:7077/", "cores": 1,
                                             "app_id": "a", "executor_id": "e",
                                             "log_format": "json"})");
  AgentConfig config;
  loadConfig(ConfigSources{{file}, {}, {}}, config);
  EXPECT_EQ(config.log_format, "json");
  AgentConfig from_env;
  loadConfig(ConfigSources{{file}, {"DOCKHAND_LOG_FORMAT=text"}, {}}, from_env);
  EXPECT_EQ(from_env.log_format, "text");
  AgentConfig from_option;
  loadConfig(ConfigSources{{file}, {"DOCKHAND_LOG_FORMAT=text"}, {{"log-format", "JSON"}}},
             from_option);
  EXPECT_EQ(from_option.log_format, "JSON");
  EXPECT_EQ(AgentConfig().log_format, "text");
}

TEST(ConfigJsonTest, CoversEveryKeyAndRedactsSecrets) {
  AgentConfig config;
  nlohmann::json json = configToJson(config);
  for (const std::string& key : configKeys()) EXPECT_TRUE(json.contains(key)) << key;
  EXPECT_EQ(json.size(), configKeys().size());

  nlohmann::json redacted = redactSecrets(nlohmann::json::parse(
      R"({"a": 1, "plugins": [{"config": {"api_Token": "t", "db_password": "p", "x": "y"}}],
          "client_secret": {"nested": 1}})"));
  EXPECT_EQ(redacted["plugins"][0]["config"]["api_Token"], "<redacted>");
  EXPECT_EQ(redacted["plugins"][0]["config"]["db_password"], "<redacted>");
  EXPECT_EQ(redacted["plugins"][0]["config"]["x"], "y");
  EXPECT_EQ(redacted["client_secret"], "<redacted>");
  EXPECT_EQ(redacted["a"], 1);
}

TEST_F(ConfigLayersTest, ValidateCommandPrintsEveryProblemAndExits2) {
  std::string bad = write("bad.json", R"({"cores": "x", "colour": 1})");
  std::ostringstream out;
  std::ostringstream err;
  EXPECT_EQ(runConfigCommand({"validate", "--no-env", bad}, out, err), 2);
  EXPECT_NE(err.str().find(bad + ": /colour: unknown key"), std::string::npos) << err.str();
  EXPECT_NE(err.str().find(bad + ": /cores: expected an integer"), std::string::npos);
  EXPECT_NE(err.str().find("2 problems found in " + bad), std::string::npos) << err.str();

  std::string good = write("good.json", kBase);
  std::ostringstream out2;
  EXPECT_EQ(runConfigCommand({"validate", "--no-env", good}, out2, err), 0);
  EXPECT_EQ(out2.str(), "valid: " + good + " (and the plugins' configs)\n");
  EXPECT_EQ(runConfigCommand({"frobnicate"}, out, err), 64);
}

// The plugins' configs are checked against their schemas as the agent would check them, the
// migration entries' composed configs included; nothing is created.
TEST_F(ConfigLayersTest, ValidateChecksThePluginsConfigsWithTheAgentsWords) {
  nlohmann::json config = nlohmann::json::parse(kBase);
  config["plugins"] = {{{"name", "process"}, {"config", {{"kill_grace_ms", "soon"}}}},
                       {{"name", "no-such-plugin"}, {"required", false}}};
  config["decommission"] = {{"migration", {"fallback"}}};
  std::string file = write("plugins.json", config.dump());
  std::ostringstream out;
  std::ostringstream err;
  EXPECT_EQ(runConfigCommand({"validate", "--no-env", file}, out, err), 8);
  EXPECT_THAT(err.str(), ::testing::HasSubstr(
                             "config /kill_grace_ms: expected integer, got string (from config "
                             "/plugins/0)"));
  EXPECT_THAT(
      err.str(),
      ::testing::HasSubstr("decommission.migration names 'fallback' but fallback_dir is not set"));
  EXPECT_THAT(err.str(), ::testing::Not(::testing::HasSubstr("no-such-plugin")));  // optional
  EXPECT_THAT(err.str(), ::testing::HasSubstr("2 plugin problems found with " + file));
  std::ostringstream out2;
  EXPECT_EQ(runConfigCommand({"validate", "--no-env", "--no-plugins", file}, out2, err), 0);
  EXPECT_EQ(out2.str(), "valid: " + file + "\n");
}

TEST_F(ConfigLayersTest, ShowCommandPrintsValuesWithTheirOrigin) {
  std::string file =
      write("agent.json",
            R"({"driver_url": "ws://driver:7077/", "app_id": "app", "executor_id": "e1", "cores": 2,
          "plugins": [{"name": "process", "config": {"token": "hunter2"}}]})");
  std::ostringstream out;
  std::ostringstream err;
  EXPECT_EQ(runConfigCommand({"show", "--no-env", "--config", file, "--cores", "3"}, out, err), 0)
      << err.str();
  std::string text = "\n" + out.str();
  EXPECT_EQ(text.find("hunter2"), std::string::npos) << text;
  EXPECT_NE(text.find("<redacted>"), std::string::npos) << text;
  auto line = [&](const std::string& key) {
    auto at = text.find("\n" + key + " ");
    return at == std::string::npos ? "" : text.substr(at + 1, text.find('\n', at + 1) - at - 1);
  };
  EXPECT_NE(line("/cores").find("cli"), std::string::npos) << text;
  EXPECT_NE(line("/app_id").find("file:" + file), std::string::npos) << text;
  EXPECT_NE(line("/connect_tries").find("default"), std::string::npos) << text;
}

}  // namespace
}  // namespace dockhand::agent
