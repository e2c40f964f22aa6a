#include "app/agent_metrics.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace dockhand::agent {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

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

TEST(AgentGaugesTest, SetFromTheSnapshot) {
  metrics::Registry registry;
  AgentGauges gauges(registry);
  AgentSnapshot snapshot;
  snapshot.backend.state = "running";
  snapshot.backend.running_tasks = 3;
  snapshot.backend.waiting_tasks = 2;
  snapshot.backend.cores = 8;
  snapshot.backend.cores_in_use = 5;
  snapshot.blocks = 4;
  snapshot.block_bytes = 4096;
  snapshot.resources["gpu"] = AddressUse{.total = 3, .in_use = 2};
  gauges.update(snapshot);
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
  AgentSnapshot snapshot;
  snapshot.backend.state = "decommissioning";
  protocol::DecommissionProgress& d = snapshot.backend.decommission.emplace();
  d.state = "migrating";
  d.blocks_migrated = 2;
  d.blocks_left = 5;
  d.blocks_failed = 1;
  d.bytes_migrated = 200;
  d.bytes_left = 500;
  d.bytes_per_s = 100;
  d.eta_ms = 5000;
  gauges.update(snapshot);
  std::string text = registry.expose();
  EXPECT_THAT(text, HasSubstr("dockhand_agent_state{state=\"decommissioning\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("dockhand_decommission_phase{phase=\"migrating\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("dockhand_decommission_phase{phase=\"inactive\"} 0\n"));
  EXPECT_THAT(text, HasSubstr("dockhand_decommission_blocks{state=\"migrated\"} 2\n"));
  EXPECT_THAT(text, HasSubstr("dockhand_decommission_blocks{state=\"left\"} 5\n"));
  EXPECT_THAT(text, HasSubstr("dockhand_decommission_blocks{state=\"failed\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("dockhand_decommission_bytes{state=\"migrated\"} 200\n"));
  EXPECT_THAT(text, HasSubstr("dockhand_decommission_bytes{state=\"left\"} 500\n"));
  EXPECT_THAT(text, HasSubstr("dockhand_decommission_bytes_per_second 100\n"));
  EXPECT_THAT(text, HasSubstr("dockhand_decommission_eta_seconds 5\n"));
  // Once it is over (a later snapshot without one), the phase is inactive again.
  gauges.update(AgentSnapshot{});
  EXPECT_THAT(registry.expose(), HasSubstr("dockhand_decommission_phase{phase=\"inactive\"} 1\n"));
}

TEST(AgentGaugesTest, AnAddressIsInUseWhileAnyTaskHoldsIt) {
  // Three GPUs shared four ways: 0 held by one task, 2 by two, 1 by none.
  DiscoveredResource gpu;
  gpu.info.name = "gpu";
  gpu.info.addresses = {"0", "1", "2"};
  const std::map<std::string, DiscoveredResource> resources{{"gpu", gpu}};
  ResourceLedger ledger(resources, {{"gpu", 0.25}});
  ASSERT_TRUE(ledger.acquire(7, {{"gpu", {"0"}}}).ok());
  ASSERT_TRUE(ledger.acquire(8, {{"gpu", {"2"}}}).ok());
  ASSERT_TRUE(ledger.acquire(9, {{"gpu", {"2"}}}).ok());
  const auto use = addressUse(resources, ledger);
  ASSERT_EQ(use.count("gpu"), 1U);
  EXPECT_EQ(use.at("gpu").total, 3U);
  EXPECT_EQ(use.at("gpu").in_use, 2U);
  ledger.release(7);
  EXPECT_EQ(addressUse(resources, ledger).at("gpu").in_use, 1U);
}

}  // namespace
}  // namespace dockhand::agent
