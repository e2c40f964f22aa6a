// planReload: which differences between the running and the re-read configuration a reload
// applies live, and which it names and leaves for the next restart.
#include "app/config_reload.h"

#include <gtest/gtest.h>

namespace dockhand::agent {
namespace {

using nlohmann::json;

std::vector<std::string> paths(const std::vector<ConfigChange>& changes) {
  std::vector<std::string> out;
  out.reserve(changes.size());
  for (const auto& c : changes) out.push_back(c.path);
  return out;
}

TEST(ConfigReloadTest, LiveSettingsApplyAndTheRestAreNamedByPath) {
  const json running = {{"log_level", "info"},
                        {"keep_task_dirs", 100},
                        {"cores", 4},
                        {"decommission", {{"deadline_ms", 1000}, {"signal", "SIGPWR"}}},
                        {"plugins", json::array({{{"name", "process"}}})}};
  json wanted = running;
  wanted["log_level"] = "debug";
  wanted["keep_task_dirs"] = 5;
  wanted["cores"] = 8;
  wanted["decommission"]["deadline_ms"] = 2000;
  wanted["plugins"][0]["config"] = {{"user", "nobody"}};
  wanted["work_dir"] = "/elsewhere";
  const ReloadPlan plan = planReload(running, wanted);
  EXPECT_EQ(paths(plan.live), (std::vector<std::string>{"/keep_task_dirs", "/log_level"}));
  EXPECT_EQ(paths(plan.at_restart), (std::vector<std::string>{"/cores", "/decommission/deadline_ms",
                                                              "/plugins", "/work_dir"}));
  EXPECT_EQ(plan.live[1].from, "info");
  EXPECT_EQ(plan.live[1].to, "debug");
  EXPECT_TRUE(plan.at_restart[3].from.is_null()) << "a member the running config lacks";
}

TEST(ConfigReloadTest, TheSameConfigurationChangesNothing) {
  const json config = {{"log_level", "info"}, {"decommission", {{"enabled", true}}}};
  const ReloadPlan plan = planReload(config, config);
  EXPECT_TRUE(plan.live.empty());
  EXPECT_TRUE(plan.at_restart.empty());
}

}  // namespace
}  // namespace dockhand::agent
