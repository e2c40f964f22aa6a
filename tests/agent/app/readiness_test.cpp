#include "app/readiness.h"

#include <gtest/gtest.h>

namespace dockhand::agent {
namespace {

using Json = nlohmann::json;

TEST(ReadinessTest, ReadyWhenRunningWithEveryRequiredPluginLoaded) {
  EXPECT_EQ(notReadyReason(Json::parse(R"({"state": "running", "plugins": [
      {"name": "process", "required": true, "status": "loaded"},
      {"name": "extra", "required": false, "status": "failed"}]})")),
            std::nullopt);
}

TEST(ReadinessTest, NotReadyBeforeRegistrationWhileDecommissioningOrStopping) {
  for (const char* state :
       {"idle", "connecting", "fetching-config", "registering", "decommissioning", "stopping"}) {
    EXPECT_EQ(notReadyReason(Json{{"state", state}}), std::string(state));
  }
}

TEST(ReadinessTest, NotReadyWithoutAStatusYet) {
  EXPECT_EQ(notReadyReason(Json::object()), "starting");
  EXPECT_EQ(notReadyReason(Json{{"state", 3}}), "starting");
  EXPECT_EQ(notReadyReason(Json::array()), "starting");
}

TEST(ReadinessTest, NotReadyWhenARequiredPluginIsNotLoaded) {
  EXPECT_EQ(notReadyReason(Json::parse(R"({"state": "running", "plugins": [
      {"name": "gpu-runner", "required": true, "status": "failed"}]})")),
            "required plugin 'gpu-runner' is not loaded");
}

}  // namespace
}  // namespace dockhand::agent
