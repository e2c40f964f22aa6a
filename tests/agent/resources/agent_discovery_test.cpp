// AgentDiscovery over fake discoverers and a real ResourceGuard: the order plugins are asked
// in, the script step loaded only when a request names a script (once), scripts from the app's
// profile dropped unless allowed, what is found registered and described for the status.
#include "resources/agent_discovery.h"

#include <gtest/gtest.h>

#include "fake_ports.h"

namespace dockhand::agent {
namespace {

using fakes::FakeExecutor;

class Named : public Discoverer {
 public:
  Named(std::string name, std::map<std::string, std::string> answers)
      : name_(std::move(name)), answers_(std::move(answers)) {}
  const std::string& name() const override { return name_; }
  PluginResult discover(const std::string& request_json) override {
    const auto request = nlohmann::json::parse(request_json);
    requests.push_back(request);
    auto it = answers_.find(request["name"].get<std::string>());
    if (it == answers_.end()) return PluginResult{DH_DECLINED, {}, {}};
    return PluginResult{DH_OK, it->second, {}};
  }
  PluginResult describe() override { return PluginResult{DH_OK, R"({"model": "x"})", {}}; }
  std::vector<nlohmann::json> requests;

 private:
  std::string name_;
  std::map<std::string, std::string> answers_;
};

class NoStatuses final : public TaskStatusSink {
 public:
  void onTaskStatus(const TaskStatusEvent&) override {}
};

protocol::ResourceProfile asking(const std::string& name, std::int64_t amount,
                                 const std::string& script = {}) {
  protocol::ResourceProfile profile;
  profile.executor_resources[name].amount = amount;
  profile.executor_resources[name].discovery_script = script;
  profile.task_resources[name] = 1;
  return profile;
}

class AgentDiscoveryTest : public ::testing::Test {
 protected:
  FakeExecutor executor_;
  NoStatuses statuses_;
  ResourceGuard guard_{executor_, statuses_};
  Named gpus_{"gpus", {{"gpu", R"({"name": "gpu", "addresses": ["0", "1"]})"}}};
  Named script_{"script", {{"fpga", R"({"name": "fpga", "addresses": ["a"]})"}}};
  int script_loads_ = 0;

  AgentDiscovery make(AgentDiscovery::Options options = {}) {
    return AgentDiscovery(std::move(options), guard_, {&gpus_}, nullptr, [this] {
      ++script_loads_;
      return &script_;
    });
  }
};

TEST_F(AgentDiscoveryTest, FindsRegistersAndDescribesWhatTheProfileAsks) {
  AgentDiscovery discovery = make();
  EXPECT_EQ(discovery.discoveryJson(), nullptr);
  auto found = discovery.discover(asking("gpu", 2));
  ASSERT_TRUE(found.ok()) << found.error().message;
  EXPECT_EQ(found->at("gpu").addresses, (std::vector<std::string>{"0", "1"}));
  EXPECT_EQ(script_loads_, 0);  // no request names a script: the script step is never loaded
  EXPECT_EQ(discovery.use().at("gpu").total, 2U);
  EXPECT_EQ(discovery.discoveryJson()["chain"], nlohmann::json({"gpus"}));
  EXPECT_EQ(discovery.discoveryJson()["plugins"]["gpus"]["model"], "x");
  EXPECT_EQ(discovery.resourcesJson()["gpu"]["found_by"], "gpus");
}

TEST_F(AgentDiscoveryTest, TheScriptStepIsLoadedOnceWhenARequestNamesAScriptAndAskedLast) {
  AgentDiscovery::Options options;
  options.configured["fpga"].amount = 1;
  options.configured["fpga"].discovery_script = "/opt/find-fpga";
  AgentDiscovery discovery = make(options);
  auto found = discovery.discover(asking("gpu", 1));
  ASSERT_TRUE(found.ok()) << found.error().message;
  EXPECT_EQ(found->count("fpga"), 1U);
  EXPECT_EQ(script_loads_, 1);
  EXPECT_EQ(discovery.discoveryJson()["chain"], nlohmann::json({"gpus", "script"}));
  ASSERT_FALSE(script_.requests.empty());
  EXPECT_EQ(script_.requests.back()["discovery_script"], "/opt/find-fpga");
  ASSERT_TRUE(discovery.discover(asking("gpu", 1)).ok());
  EXPECT_EQ(script_loads_, 1);
}

TEST_F(AgentDiscoveryTest, AScriptTheAppsProfileNamesIsDroppedUnlessAllowed) {
  AgentDiscovery refused = make();
  auto found = refused.discover(asking("fpga", 1, "/tmp/evil.sh"));
  ASSERT_FALSE(found.ok());  // nothing else finds an fpga
  EXPECT_EQ(script_loads_, 0);
  EXPECT_NE(found.error().message.find("fpga"), std::string::npos) << found.error().message;

  AgentDiscovery::Options allowed;
  allowed.allow_profile_scripts = true;
  AgentDiscovery discovery = make(allowed);
  ASSERT_TRUE(discovery.discover(asking("fpga", 1, "/opt/find-fpga")).ok());
  EXPECT_EQ(script_loads_, 1);
}

TEST_F(AgentDiscoveryTest, TheResourcesFileWinsAndTooFewAddressesAreRefused) {
  AgentDiscovery::Options options;
  options.given["gpu"] = protocol::ResourceInfo{"gpu", {"7"}};
  options.given_source = "resources file /etc/r.json";
  AgentDiscovery discovery = make(options);
  auto found = discovery.discover(asking("gpu", 1));
  ASSERT_TRUE(found.ok()) << found.error().message;
  EXPECT_EQ(found->at("gpu").addresses, (std::vector<std::string>{"7"}));
  EXPECT_TRUE(gpus_.requests.empty());

  auto refused = discovery.discover(asking("gpu", 2));
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("resources file /etc/r.json"), std::string::npos)
      << refused.error().message;
}

}  // namespace
}  // namespace dockhand::agent
