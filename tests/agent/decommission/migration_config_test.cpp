// composeMigrationConfig: what a block-migration plugin is given of the agent's settings.
#include "decommission/migration_config.h"

#include <gtest/gtest.h>

namespace dockhand::agent {
namespace {

using nlohmann::json;

const std::vector<MigrationSetting> kSettings = {
    {"max_concurrent", "decommission.max_concurrent", 4},
    {"tls", "tls", nullptr},  // not set on this agent
    {"dir", "fallback_dir", "/srv/fallback"}};

TEST(MigrationConfigTest, APluginGetsTheSettingsItsSchemaDeclaresAndNoOthers) {
  const json schema = {{"properties", {{"max_concurrent", {{"type", "integer"}}}}}};
  auto config = composeMigrationConfig("peer", json::object(), kSettings, schema);
  ASSERT_TRUE(config.ok()) << config.error().message;
  EXPECT_EQ(*config, json({{"max_concurrent", 4}}));
}

TEST(MigrationConfigTest, WhatTheConfigGivesWinsOverTheAgentsSetting) {
  const json schema = {
      {"properties", {{"max_concurrent", json::object()}, {"dir", json::object()}}}};
  auto config = composeMigrationConfig("fallback", {{"dir", "/elsewhere"}, {"extra", true}},
                                       kSettings, schema);
  ASSERT_TRUE(config.ok()) << config.error().message;
  EXPECT_EQ(*config, json({{"max_concurrent", 4}, {"dir", "/elsewhere"}, {"extra", true}}));
}

TEST(MigrationConfigTest, ARequiredSettingThatIsNotSetIsRefusedNamingIt) {
  const json schema = {{"properties", {{"tls", json::object()}}}, {"required", {"tls"}}};
  auto refused = composeMigrationConfig("secure", json::object(), kSettings, schema);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().message,
            "decommission.migration names 'secure' but tls is not set (or give the plugin's tls "
            "in its config)");
  // Given in the plugin's own config, it is not needed from the agent.
  auto given =
      composeMigrationConfig("secure", {{"tls", {{"ca_file", "/ca.pem"}}}}, kSettings, schema);
  ASSERT_TRUE(given.ok()) << given.error().message;
  EXPECT_EQ((*given)["tls"]["ca_file"], "/ca.pem");
}

TEST(MigrationConfigTest, APluginWithoutASchemaGetsWhatItsConfigGivesAlone) {
  auto config = composeMigrationConfig("plain", {{"a", 1}}, kSettings, nullptr);
  ASSERT_TRUE(config.ok()) << config.error().message;
  EXPECT_EQ(*config, json({{"a", 1}}));
}

}  // namespace
}  // namespace dockhand::agent
