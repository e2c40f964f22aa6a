#include "app/readiness.h"

#include <gtest/gtest.h>

#include "app/plugin_loader.h"

namespace dockhand::agent {
namespace {

AgentSnapshot inState(const std::string& state) {
  AgentSnapshot snapshot;
  snapshot.backend.state = state;
  return snapshot;
}

TEST(ReadinessTest, ReadyWhenRunningWithEveryRequiredPluginLoaded) {
  EXPECT_EQ(notReadyReason(inState("running")), std::nullopt);
}

TEST(ReadinessTest, NotReadyBeforeRegistrationWhileDecommissioningOrStopping) {
  for (const char* state :
       {"idle", "connecting", "fetching-config", "registering", "decommissioning", "stopping"}) {
    EXPECT_EQ(notReadyReason(inState(state)), std::string(state));
  }
}

TEST(ReadinessTest, NotReadyWithoutAStatusYet) {
  EXPECT_EQ(notReadyReason(AgentSnapshot{}), "starting");
}

TEST(ReadinessTest, NotReadyWhenARequiredPluginIsNotLoaded) {
  AgentSnapshot snapshot = inState("running");
  snapshot.plugin_not_loaded = "gpu-runner";
  EXPECT_EQ(notReadyReason(snapshot), "required plugin 'gpu-runner' is not loaded");
}

TEST(ReadinessTest, OnlyARequiredPluginThatFailedCounts) {
  LoadedPlugin extra;
  extra.spec.target = "extra";
  extra.spec.required = false;
  extra.error = "no such file";
  LoadedPlugin gpu;
  gpu.spec.target = "gpu-runner";
  gpu.error = "refused";
  EXPECT_EQ(requiredPluginNotLoaded({extra}), std::nullopt);
  EXPECT_EQ(requiredPluginNotLoaded({extra, gpu}), "gpu-runner");
}

}  // namespace
}  // namespace dockhand::agent
