// The resources part of the agent's status output, from a ledger with tasks on shared and
// whole addresses, with fake discoverers.
#include "resources/resource_status.h"

#include <gtest/gtest.h>

namespace dockhand::agent {
namespace {

using nlohmann::json;

class NamedDiscoverer : public Discoverer {
 public:
  explicit NamedDiscoverer(std::string name) : name_(std::move(name)) {}
  const std::string& name() const override { return name_; }
  PluginResult discover(const std::string&) override { return PluginResult{DH_DECLINED, {}, {}}; }

 private:
  std::string name_;
};

DiscoveredResource resource(const std::string& name, std::vector<std::string> addresses,
                            const std::string& source, Discoverer* owner) {
  DiscoveredResource r;
  r.info.name = name;
  r.info.addresses = std::move(addresses);
  r.source = source;
  r.requested = static_cast<std::int64_t>(r.info.addresses.size());
  r.owner = owner;
  return r;
}

TEST(ResourceStatusTest, ShowsWhoFoundEachResourceItsDetailsAndWhichTaskHoldsWhat) {
  NamedDiscoverer nvidia("nvidia");
  std::map<std::string, DiscoveredResource> found = {
      {"gpu", resource("gpu", {"0", "1"}, "nvidia", &nvidia)},
      {"fpga", resource("fpga", {"f0"}, "resources file /etc/r.json", nullptr)}};
  const std::map<std::string, double> amounts = {{"gpu", 0.25}};
  ResourceLedger ledger(found, amounts);
  ASSERT_TRUE(ledger.acquire(7, {{"gpu", {"0"}}}).ok());
  ASSERT_TRUE(ledger.acquire(8, {{"gpu", {"0"}}, {"fpga", {"f0"}}}).ok());
  const json gpus = {{"gpus", {{{"index", "0"}, {"uuid", "GPU-a"}}, {{"index", "1"}}}}};
  const json status =
      resourceStatusJson(found, amounts, ledger, {{"nvidia", gpus}, {"host", {{"cores", 4}}}});

  const json& gpu = status["gpu"];
  EXPECT_EQ(gpu["addresses"], json::array({"0", "1"}));
  EXPECT_EQ(gpu["found_by"], "nvidia");
  EXPECT_EQ(gpu["requested"], 2);
  EXPECT_EQ(gpu["amount_per_task"], 0.25);
  EXPECT_EQ(gpu["tasks_per_address"], 4);
  EXPECT_EQ(gpu["details"], gpus);
  EXPECT_EQ(gpu["allocation"]["0"], (json{{"held_by", json::array({7, 8})}, {"free", 2}}));
  EXPECT_EQ(gpu["allocation"]["1"], (json{{"held_by", json::array()}, {"free", 4}}));
  EXPECT_EQ(
      gpu["tasks"],
      json::array({json{{"task_id", 7}, {"addresses", json::array({"0"})}, {"amount", 0.25}},
                   json{{"task_id", 8}, {"addresses", json::array({"0"})}, {"amount", 0.25}}}));

  const json& fpga = status["fpga"];
  EXPECT_EQ(fpga["found_by"], "resources file /etc/r.json");
  EXPECT_TRUE(fpga["details"].is_null()) << "a file's allocation has no plugin to describe it";
  EXPECT_EQ(fpga["amount_per_task"], 1.0);
  EXPECT_EQ(fpga["tasks_per_address"], 1);
  EXPECT_EQ(fpga["allocation"]["f0"], (json{{"held_by", json::array({8})}, {"free", 0}}));
  EXPECT_EQ(
      fpga["tasks"],
      json::array({json{{"task_id", 8}, {"addresses", json::array({"f0"})}, {"amount", 1.0}}}));

  ledger.release(8);
  const json after = resourceStatusJson(found, amounts, ledger, {});
  EXPECT_EQ(after["gpu"]["allocation"]["0"], (json{{"held_by", json::array({7})}, {"free", 3}}));
  EXPECT_EQ(after["fpga"]["allocation"]["f0"], (json{{"held_by", json::array()}, {"free", 1}}));
  EXPECT_TRUE(after["gpu"]["details"].is_null()) << "nothing described";
}

TEST(ResourceStatusTest, NoResourcesIsAnEmptyObject) {
  ResourceLedger ledger({}, {});
  EXPECT_EQ(resourceStatusJson({}, {}, ledger, {}), json::object());
}

}  // namespace
}  // namespace dockhand::agent
