#include "resources/resources_file.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace dockhand::agent {
namespace {

class ResourcesFileTest : public ::testing::Test {
 protected:
  std::string write(const std::string& text) {
    std::ofstream(path_) << text;
    return path_.string();
  }
  void TearDown() override { std::filesystem::remove(path_); }
  std::filesystem::path path_ =
      std::filesystem::temp_directory_path() / ("resources-" + std::to_string(getpid()) + ".json");
};

TEST_F(ResourcesFileTest, ReadsSparkFormat) {
  auto resources = loadResourcesFile(write(R"([
    {"id": {"componentName": "spark.executor", "resourceName": "gpu"}, "addresses": ["0", "1"]},
    {"id": {"componentName": "spark.executor", "resourceName": "fpga"}, "addresses": ["f0"]}])"));
  ASSERT_EQ(resources.size(), 2u);
  EXPECT_EQ(resources.at("gpu").addresses, (std::vector<std::string>{"0", "1"}));
  EXPECT_EQ(resources.at("fpga").name, "fpga");
}

TEST_F(ResourcesFileTest, ErrorsNameFileAndPath) {
  std::string file = write(R"([{"id": {"componentName": "x"}, "addresses": ["0"]}])");
  try {
    loadResourcesFile(file);
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()), file + ": /0/id/resourceName: is required (a string)");
  }
  EXPECT_THROW(loadResourcesFile(write(R"({"not": "an array"})")), ConfigError);
  EXPECT_THROW(
      loadResourcesFile(write(R"([{"id": {"resourceName": "gpu"}, "addresses": ["0", "0"]}])")),
      ConfigError);
}

// The resources_file fuzz target's input: "6.08e600" overflows a double.
TEST_F(ResourcesFileTest, NumberTooLargeForADoubleIsAConfigError) {
  const std::string file = write(std::string("6.08e600eE\0?1", 13));
  try {
    loadResourcesFile(file);
    FAIL() << "accepted";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()).rfind(file + ": invalid JSON: ", 0), 0u) << e.what();
  }
  EXPECT_THROW(parseResourcesJson("[1e400]", "inline"), ConfigError);
}

TEST(ResourcesJsonTest, ReadsTheSameAsTheFile) {
  auto resources = parseResourcesJson(
      R"([{"id": {"componentName": "spark.executor", "resourceName": "gpu"}, "addresses": ["0"]}])",
      "inline");
  ASSERT_EQ(resources.size(), 1u);
  EXPECT_EQ(resources.at("gpu").addresses, std::vector<std::string>{"0"});
  try {
    parseResourcesJson("[{}]", "inline");
    FAIL() << "accepted";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()), "inline: /0/id: is required (an object)");
  }
}

}  // namespace
}  // namespace dockhand::agent
