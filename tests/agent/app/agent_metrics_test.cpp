#include "app/agent_metrics.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace dockhand::agent {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using Json = nlohmann::json;

TEST(AgentGaugesTest, EveryGaugeIsExposedBeforeAnyStatus) {
  metrics::Registry registry;
  AgentGauges gauges(registry);
  const std::string text = registry.expose();
  EXPECT_THAT(text, HasSubstr("dockhand_tasks_running 0\n"));
  EXPECT_THAT(text, HasSubstr("dockhand_tasks_waiting 0\n"));
  EXPECT_THAT(text, HasSubstr("dockhand_cores 0\n"));
  EXPECT_THAT(text, HasSubstr("dockhand_decommission_phase{phase=\"inactive\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("dockhand_decommission_phase{phase=\"migrating\"} 0\n"));
  EXPECT_THAT(text, HasSubstr("dockhand_agent_state{state=\"running\"} 0\n"));
}

TEST(AgentGaugesTest, SetFromTheStatus) {
  metrics::Registry registry;
  AgentGauges gauges(registry);
  gauges.update(Json::parse(R"({
    "state": "running", "running_tasks": 3, "waiting_tasks": 2, "cores": {"total": 8, "in_use": 5},
    "blocks": {"count": 4, "bytes": 4096},
    "resources": {"gpu": {"addresses": ["0", "1", "2"],
                          "allocation": {"0": {"held_by": [7], "free": 0},
                                         "1": {"held_by": [], "free": 1},
                                         "2": {"held_by": [8, 9], "free": 0}}}},
    "decommission": null})"));
  const std::string text = registry.expose();
  EXPECT_THAT(text, HasSubstr("dockhand_agent_state{state=\"running\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("dockhand_agent_state{state=\"idle\"} 0\n"));
  EXPECT_THAT(text, HasSubstr("dockhand_tasks_running 3\n"));
  EXPECT_THAT(text, HasSubstr("dockhand_tasks_waiting 2\n"));
  EXPECT_THAT(text, HasSubstr("dockhand_cores 8\n"));
  EXPECT_THAT(text, HasSubstr("dockhand_cores_in_use 5\n"));
  EXPECT_THAT(text, HasSubstr("dockhand_resource_addresses{resource=\"gpu\"} 3\n"));
  EXPECT_THAT(text, HasSubstr("dockhand_resource_addresses_in_use{resource=\"gpu\"} 2\n"));
  EXPECT_THAT(text, HasSubstr("dockhand_blocks_stored 4\n"));
  EXPECT_THAT(text, HasSubstr("dockhand_blocks_stored_bytes 4096\n"));
  EXPECT_THAT(text, HasSubstr("dockhand_decommission_phase{phase=\"inactive\"} 1\n"));
}

TEST(AgentGaugesTest, DecommissionPhaseAndProgress) {
  metrics::Registry registry;
  AgentGauges gauges(registry);
  gauges.update(Json::parse(R"({"state": "decommissioning",
    "decommission": {"state": "migrating", "blocks_migrated": 2, "blocks_left": 5,
                     "blocks_failed": 1, "bytes_migrated": 200, "bytes_left": 500}})"));
  std::string text = registry.expose();
  EXPECT_THAT(text, HasSubstr("dockhand_agent_state{state=\"decommissioning\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("dockhand_decommission_phase{phase=\"migrating\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("dockhand_decommission_phase{phase=\"inactive\"} 0\n"));
  EXPECT_THAT(text, HasSubstr("dockhand_decommission_blocks{state=\"migrated\"} 2\n"));
  EXPECT_THAT(text, HasSubstr("dockhand_decommission_blocks{state=\"left\"} 5\n"));
  EXPECT_THAT(text, HasSubstr("dockhand_decommission_blocks{state=\"failed\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("dockhand_decommission_bytes{state=\"migrated\"} 200\n"));
  EXPECT_THAT(text, HasSubstr("dockhand_decommission_bytes{state=\"left\"} 500\n"));
}

TEST(AgentGaugesTest, WrongTypesCountAsAbsent) {
  metrics::Registry registry;
  AgentGauges gauges(registry);
  gauges.update(Json::parse(R"({"state": 7, "running_tasks": "many", "cores": [1],
    "resources": {"gpu": "x", "fpga": {"addresses": "0", "allocation": []}},
    "decommission": {"state": "migrating", "blocks_left": "a lot"}})"));
  const std::string text = registry.expose();
  EXPECT_THAT(text, HasSubstr("dockhand_tasks_running 0\n"));
  EXPECT_THAT(text, HasSubstr("dockhand_resource_addresses{resource=\"fpga\"} 0\n"));
  EXPECT_THAT(text, Not(HasSubstr("resource=\"gpu\"")));
  EXPECT_THAT(text, HasSubstr("dockhand_decommission_blocks{state=\"left\"} 0\n"));
  gauges.update(Json::array());
  EXPECT_THAT(registry.expose(), HasSubstr("dockhand_decommission_phase{phase=\"inactive\"} 1\n"));
}

}  // namespace
}  // namespace dockhand::agent
