// What the script plugin reads from a discovery script's stdout (Spark's contract).
#include "discovery_output.h"

#include <gtest/gtest.h>

namespace dockhand::plugins::script {
namespace {

std::string errorOf(const std::string& out, const std::string& name) {
  try {
    parseDiscoveryOutput(out, name);
  } catch (const DiscoveryOutputError& e) {
    return e.what();
  }
  return "<none>";
}

TEST(DiscoveryOutputTest, ReadsNameAndAddresses) {
  EXPECT_EQ(parseDiscoveryOutput(R"({"name":"gpu","addresses":["0","1"],"x":1})", "gpu"),
            (std::vector<std::string>{"0", "1"}));
  EXPECT_TRUE(parseDiscoveryOutput(R"({"name":"gpu"})", "gpu").empty());
  EXPECT_TRUE(parseDiscoveryOutput(R"({"name":"gpu","addresses":null})", "gpu").empty());
  EXPECT_EQ(parseDiscoveryOutput("\n {\"name\": \"gpu\", \"addresses\": [\"0\"]}\n", "gpu"),
            std::vector<std::string>{"0"});
}

TEST(DiscoveryOutputTest, RefusesWhatIsNotTheAnswer) {
  EXPECT_EQ(errorOf("GPU 0: Tesla\n", "gpu"),
            R"(printed no JSON object {"name": ..., "addresses": [...]}; stdout: GPU 0: Tesla)");
  EXPECT_EQ(errorOf("", "gpu").rfind("printed no JSON object", 0), 0u);
  EXPECT_EQ(errorOf("[1]", "gpu").rfind("printed no JSON object", 0), 0u);
  EXPECT_EQ(errorOf(R"({"name":1})", "gpu").rfind("printed an object without a string", 0), 0u);
  EXPECT_EQ(errorOf(R"({"name":"fpga"})", "gpu"), "reported resource 'fpga', not 'gpu'");
  EXPECT_EQ(errorOf(R"({"name":"gpu","addresses":"0"})", "gpu").rfind("printed \"addresses\"", 0),
            0u);
  EXPECT_EQ(errorOf(R"({"name":"gpu","addresses":[0]})", "gpu"),
            "printed an address that is not a string: 0");
  EXPECT_EQ(errorOf(R"({"name":"gpu","addresses":[1e600]})", "gpu").rfind("printed no JSON", 0),
            0u);
}

TEST(DiscoveryOutputTest, ExcerptIsBoundedAndTrimmed) {
  EXPECT_EQ(excerpt(""), "(nothing)");
  EXPECT_EQ(excerpt("abc \n\n"), "abc");
  EXPECT_EQ(excerpt(std::string(3000, 'x')), std::string(2000, 'x') + "...");
}

}  // namespace
}  // namespace dockhand::plugins::script
