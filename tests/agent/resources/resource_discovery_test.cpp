// The discovery chain's rules (order, declines, checks of each answer) and the ledger's exact
// accounting of shared addresses, with fake discoverers.
#include "resources/resource_discovery.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace dockhand::agent {
namespace {

using ::testing::HasSubstr;
using Kind = ResourceError::Kind;

class FakeDiscoverer : public Discoverer {
 public:
  FakeDiscoverer(std::string name, std::map<std::string, PluginResult> answers)
      : name_(std::move(name)), answers_(std::move(answers)) {}
  const std::string& name() const override { return name_; }
  PluginResult discover(const std::string& request_json) override {
    asked.push_back(request_json);
    auto request = nlohmann::json::parse(request_json);
    auto it = answers_.find(request["name"]);
    if (it == answers_.end()) return PluginResult{DH_DECLINED, {}, {}};
    return it->second;
  }
  std::vector<std::string> asked;

 private:
  std::string name_;
  std::map<std::string, PluginResult> answers_;
};

PluginResult answer(const std::string& json) { return PluginResult{DH_OK, json, {}}; }

ResourceRequests want(const std::string& name, std::int64_t amount) {
  ResourceRequests r;
  r[name].amount = amount;
  return r;
}

ResourceError errorOf(DiscoveryChain& chain, const ResourceRequests& requests,
                      const std::map<std::string, protocol::ResourceInfo>& given = {}) {
  try {
    chain.discoverAll(requests, given);
  } catch (const ResourceError& e) {
    return e;
  }
  return ResourceError(Kind::kNone, "");
}

TEST(DiscoveryChainTest, FirstPluginThatAnswersWinsAndDeclinesPassOn) {
  FakeDiscoverer first("nvidia", {});
  FakeDiscoverer second("script", {{"gpu", answer(R"({"name":"gpu","addresses":["0","1"]})")}});
  FakeDiscoverer third("static", {{"gpu", answer(R"({"name":"gpu","addresses":["9"]})")}});
  DiscoveryChain chain({&first, &second, &third});
  ResourceRequests requests = want("gpu", 2);
  requests["gpu"].vendor = "nvidia.com";
  auto found = chain.discoverAll(requests, {});
  ASSERT_EQ(found.count("gpu"), 1u);
  EXPECT_EQ(found["gpu"].info.addresses, (std::vector<std::string>{"0", "1"}));
  EXPECT_EQ(found["gpu"].source, "script");
  EXPECT_EQ(found["gpu"].owner, &second);
  EXPECT_EQ(nlohmann::json::parse(first.asked.at(0)),
            nlohmann::json::parse(R"({"name":"gpu","amount":2,"vendor":"nvidia.com"})"));
  EXPECT_TRUE(third.asked.empty()) << "the chain stops at the first answer";
}

TEST(DiscoveryChainTest, ResourcesFileIsTakenAsGivenAndOnlyTheRestIsDiscovered) {
  FakeDiscoverer plugin("static", {{"fpga", answer(R"({"name":"fpga","addresses":["f0"]})")}});
  DiscoveryChain chain({&plugin});
  ResourceRequests requests = want("gpu", 2);
  requests["fpga"].amount = 1;
  auto found = chain.discoverAll(requests, {{"gpu", {"gpu", {"4", "5"}}}}, "resources file x");
  EXPECT_EQ(found["gpu"].info.addresses, (std::vector<std::string>{"4", "5"}));
  EXPECT_EQ(found["gpu"].source, "resources file x");
  EXPECT_EQ(found["fpga"].source, "static");
  ASSERT_EQ(plugin.asked.size(), 1u) << "gpu is not asked of any plugin";
}

TEST(DiscoveryChainTest, FewerAddressesThanRequestedNamesResourceFoundAndRequested) {
  FakeDiscoverer plugin("script", {{"gpu", answer(R"({"name":"gpu","addresses":["0"]})")}});
  DiscoveryChain chain({&plugin});
  auto e = errorOf(chain, want("gpu", 2));
  EXPECT_EQ(e.kind(), Kind::kInsufficient);
  EXPECT_STREQ(e.what(), "resource 'gpu': 2 requested, but script found only 1 address(es): [0]");
  // The file is checked the same way.
  DiscoveryChain empty({});
  e = errorOf(empty, want("gpu", 3), {{"gpu", {"gpu", {"0", "1"}}}});
  EXPECT_STREQ(e.what(),
               "resource 'gpu': 3 requested, but resources file found only 2 address(es): [0, 1]");
}

TEST(DiscoveryChainTest, NobodyAnswersNamesTheDecliners) {
  FakeDiscoverer a("nvidia", {});
  FakeDiscoverer b("static", {});
  DiscoveryChain chain({&a, &b});
  EXPECT_STREQ(errorOf(chain, want("fpga", 1)).what(),
               "resource 'fpga': 1 requested, none found: every discovery plugin declined "
               "(nvidia, static)");
  DiscoveryChain none({});
  EXPECT_STREQ(errorOf(none, want("fpga", 1)).what(),
               "resource 'fpga': 1 requested, none found: no discovery plugin is loaded");
}

TEST(DiscoveryChainTest, EachBadAnswerHasItsOwnError) {
  auto check = [](PluginResult result, Kind kind, const std::string& message) {
    FakeDiscoverer plugin("p", {{"gpu", std::move(result)}});
    DiscoveryChain chain({&plugin});
    auto e = errorOf(chain, want("gpu", 1));
    EXPECT_EQ(e.kind(), kind) << e.what();
    EXPECT_EQ(std::string(e.what()), message);
  };
  check(answer(R"({"name":"gpu","addresses":["0","0"]})"), Kind::kDuplicate,
        "resource 'gpu': plugin 'p' lists address '0' twice");
  check(answer(R"({"name":"fpga","addresses":["0"]})"), Kind::kNameMismatch,
        "resource 'gpu': plugin 'p' answered for resource 'fpga', not 'gpu'");
  check(answer("not json"), Kind::kMalformed,
        "resource 'gpu': plugin 'p' answered with malformed output (expected a JSON object "
        R"({"name": ..., "addresses": [...]}): not json)");
  check(answer(R"({"name":"gpu","addresses":[0]})"), Kind::kMalformed,
        "resource 'gpu': plugin 'p': \"addresses\" holds number 0, not a string");
  check(PluginResult{DH_ERROR, {}, "nvidia-smi failed"}, Kind::kPluginError,
        "resource 'gpu': plugin 'p' failed: nvidia-smi failed");
}

// Spark's chain: the configured plugins, then always the script plugin. A request naming a
// script reaches the script step after every configured plugin declined; one without a
// script never reaches it.
TEST(DiscoveryChainTest, ScriptStepIsAskedLastAndOnlyForARequestThatNamesAScript) {
  FakeDiscoverer nvidia("nvidia", {});
  FakeDiscoverer statics("static", {{"fpga", answer(R"({"name":"fpga","addresses":["f0"]})")}});
  FakeDiscoverer script("script", {{"gpu", answer(R"({"name":"gpu","addresses":["0","1"]})")},
                                   {"fpga", answer(R"({"name":"fpga","addresses":["f9"]})")},
                                   {"tpu", answer(R"({"name":"tpu","addresses":["t0"]})")}});
  DiscoveryChain chain({&statics, &nvidia}, &script);
  ResourceRequests requests = want("gpu", 2);
  requests["gpu"].discovery_script = "/opt/getGpus.sh";
  requests["fpga"].amount = 1;
  requests["fpga"].discovery_script = "/opt/getFpgas.sh";
  auto found = chain.discoverAll(requests, {});
  EXPECT_EQ(found["gpu"].source, "script");
  EXPECT_EQ(found["gpu"].owner, &script);
  EXPECT_EQ(found["gpu"].info.addresses, (std::vector<std::string>{"0", "1"}));
  EXPECT_EQ(found["fpga"].source, "static") << "configured plugins come first";
  ASSERT_EQ(script.asked.size(), 1u);
  EXPECT_EQ(nlohmann::json::parse(script.asked[0])["discovery_script"], "/opt/getGpus.sh");
  EXPECT_EQ(nvidia.asked.size(), 1u);  // gpu; fpga stopped at static

  // Without a script the step is not part of the chain.
  EXPECT_STREQ(errorOf(chain, want("tpu", 1)).what(),
               "resource 'tpu': 1 requested, none found: every discovery plugin declined "
               "(static, nvidia)");
  // A step that is also listed is asked where the list puts it, once.
  DiscoveryChain listed({&script, &statics}, &script);
  script.asked.clear();
  ResourceRequests tpu = want("tpu", 1);
  tpu["tpu"].discovery_script = "/opt/getTpus.sh";
  EXPECT_EQ(listed.discoverAll(tpu, {})["tpu"].source, "script");
  EXPECT_EQ(script.asked.size(), 1u);
}

// Spark drops a request whose amount is 0 or less: nothing is asked and nothing is refused.
TEST(DiscoveryChainTest, AmountZeroIsNoRequest) {
  FakeDiscoverer script("script", {{"gpu", answer(R"({"name":"gpu","addresses":["0"]})")}});
  DiscoveryChain chain({}, &script);
  ResourceRequests requests = want("gpu", 0);
  requests["gpu"].discovery_script = "/opt/getGpus.sh";
  requests["fpga"].amount = -1;
  EXPECT_TRUE(chain.discoverAll(requests, {}).empty());
  EXPECT_TRUE(script.asked.empty());
  // A resources file's allocation is still taken as given.
  auto found = chain.discoverAll(requests, {{"gpu", {"gpu", {"3"}}}}, "resources file x");
  EXPECT_EQ(found["gpu"].info.addresses, std::vector<std::string>{"3"});
}

// An empty address would reach a task as CUDA_VISIBLE_DEVICES= (no GPU at all).
TEST(DiscoveryChainTest, EmptyAddressIsRefused) {
  FakeDiscoverer plugin("p", {{"gpu", answer(R"({"name":"gpu","addresses":[""]})")}});
  DiscoveryChain chain({&plugin});
  auto e = errorOf(chain, want("gpu", 1));
  EXPECT_EQ(e.kind(), Kind::kEmptyAddress) << e.what();
  EXPECT_THAT(e.what(), HasSubstr("resource 'gpu': plugin 'p' reported an empty address"));
}

TEST(DiscoveryChainTest, ExtraFieldsAreIgnoredAndMissingAddressesMeanNone) {
  auto info = DiscoveryChain::parseAnswer("p", "gpu", R"({"name":"gpu","vendor":"x"})");
  EXPECT_TRUE(info.addresses.empty());
  info = DiscoveryChain::parseAnswer("p", "gpu", R"({"name":"gpu","addresses":["3"],"x":1})");
  EXPECT_EQ(info.addresses, std::vector<std::string>{"3"});
}

TEST(DiscoveryChainTest, LocalRequestsOverrideTheProfile) {
  ResourceRequests profile = want("gpu", 1);
  profile["gpu"].vendor = "nvidia.com";
  ResourceRequests local = want("gpu", 2);
  local["fpga"].amount = 1;
  auto merged = mergeRequests(profile, local);
  EXPECT_EQ(merged["gpu"].amount, 2);
  EXPECT_EQ(merged["gpu"].vendor, "nvidia.com");
  EXPECT_EQ(merged["fpga"].amount, 1);
}

std::map<std::string, DiscoveredResource> gpus(std::vector<std::string> addresses) {
  DiscoveredResource r;
  r.info = {"gpu", std::move(addresses)};
  return {{"gpu", r}};
}

TEST(ResourceLedgerTest, WholeAddressesAreNeverShared) {
  ResourceLedger ledger(gpus({"0", "1"}), {{"gpu", 1.0}});
  EXPECT_TRUE(ledger.acquire(1, {{"gpu", {"0"}}}).ok());
  EXPECT_EQ(ledger.acquire(2, {{"gpu", {"0"}}}).error().message,
            "gpu address '0' is already in use by as many running tasks as its share allows");
  EXPECT_TRUE(ledger.acquire(2, {{"gpu", {"1"}}}).ok());
  ledger.release(1);
  EXPECT_TRUE(ledger.acquire(3, {{"gpu", {"0"}}}).ok());
}

TEST(ResourceLedgerTest, FractionsShareAnAddressExactly) {
  EXPECT_EQ(ResourceLedger::slotsPerAddress(0.25), 4);
  EXPECT_EQ(ResourceLedger::slotsPerAddress(1.0 / 3), 3);
  EXPECT_EQ(ResourceLedger::slotsPerAddress(0.5), 2);
  EXPECT_EQ(ResourceLedger::slotsPerAddress(2), 1);
  ResourceLedger ledger(gpus({"0"}), {{"gpu", 0.25}});
  for (std::uint64_t t = 1; t <= 4; ++t) EXPECT_TRUE(ledger.acquire(t, {{"gpu", {"0"}}}).ok());
  EXPECT_FALSE(ledger.acquire(5, {{"gpu", {"0"}}}).ok()) << "a fifth quarter";
  ledger.release(2);
  EXPECT_EQ(ledger.freeSlots("gpu", "0"), 1);
  EXPECT_TRUE(ledger.acquire(5, {{"gpu", {"0"}}}).ok());
}

TEST(ResourceLedgerTest, RefusesUnknownAndDuplicateAddressesAndTakesNothing) {
  ResourceLedger ledger(gpus({"0", "1"}), {});
  EXPECT_EQ(ledger.acquire(1, {{"gpu", {"7"}}}).error().message,
            "gpu address '7' is not one of this agent's (0, 1)");
  EXPECT_EQ(ledger.acquire(1, {{"fpga", {"0"}}}).error().message,
            "resource 'fpga' is not offered by this agent");
  EXPECT_EQ(ledger.acquire(1, {{"gpu", {"1", "1"}}}).error().message,
            "gpu address '1' is assigned twice to the task");
  EXPECT_EQ(ledger.acquire(1, {{"gpu", {"0", "7"}}}).error().message,
            "gpu address '7' is not one of this agent's (0, 1)");
  EXPECT_EQ(ledger.freeSlots("gpu", "0"), 1) << "a refused task takes nothing";
}

}  // namespace
}  // namespace dockhand::agent
