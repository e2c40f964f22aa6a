// The agent's command line (agent_application.h): what each form of an option gives, and the
// message of each usage error.
#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "app/agent_application.h"
#include "app/plugins_new.h"

namespace dockhand::agent {
namespace {

using Options = std::vector<std::pair<std::string, std::string>>;

ParsedCommandLine parse(const std::vector<std::string>& args) {
  return parseCommandLine(agentCommandOptions(), args);
}

std::string usageError(const std::vector<std::string>& args) {
  try {
    parse(args);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(CommandLineTest, ValuesComeWithAnEqualsSignOrAsTheNextArgument) {
  const auto parsed = parse({"--cores=4", "--executor-id", "e-1", "--driver-url=ws://h:1/?a=b",
                             "--work-dir", "--strange"});
  EXPECT_EQ(parsed.options, (Options{{"cores", "4"},
                                     {"executor-id", "e-1"},
                                     {"driver-url", "ws://h:1/?a=b"},
                                     {"work-dir", "--strange"}}));
  EXPECT_TRUE(parsed.arguments.empty());
}

TEST(CommandLineTest, RepeatableOptionsKeepEveryUseInOrder) {
  const auto parsed = parse({"--config", "a.json", "--plugin-dir=/p", "--config=b.json"});
  EXPECT_EQ(parsed.options,
            (Options{{"config", "a.json"}, {"plugin-dir", "/p"}, {"config", "b.json"}}));
}

TEST(CommandLineTest, FlagsShortNamesAndArguments) {
  const auto parsed = parse({"-h", "x", "--version", "--", "--cores", "-h"});
  EXPECT_EQ(parsed.options, (Options{{"help", ""}, {"version", ""}}));
  EXPECT_EQ(parsed.arguments, (std::vector<std::string>{"x", "--cores", "-h"}));
}

TEST(CommandLineTest, UsageErrorsNameTheOption) {
  EXPECT_EQ(usageError({"--no-such-option=1"}), "unknown option '--no-such-option'");
  EXPECT_EQ(usageError({"-x"}), "unknown option '-x'");
  // Names match exactly: no abbreviations, case counts.
  EXPECT_EQ(usageError({"--exec", "e"}), "unknown option '--exec'");
  EXPECT_EQ(usageError({"--Cores", "2"}), "unknown option '--Cores'");
  EXPECT_EQ(usageError({"--cores"}), "option --cores requires a value (N)");
  EXPECT_EQ(usageError({"--help=yes"}), "option --help takes no value");
  EXPECT_EQ(usageError({"--cores", "2", "--cores=3"}), "option --cores is given more than once");
}

TEST(CommandLineTest, EveryOptionHasADescriptionAndAUniqueName) {
  std::vector<std::string> names;
  for (const auto& option : agentCommandOptions()) {
    EXPECT_FALSE(option.description.empty()) << option.name;
    EXPECT_EQ(std::count(names.begin(), names.end(), option.name), 0) << option.name;
    names.push_back(option.name);
  }
}

// `dockhand plugins new`: the class name a template gets, and the usage errors it names.
TEST(PluginsNewTest, ClassNamesComeFromThePluginName) {
  EXPECT_EQ(templateClassName("my-store"), "MyStore");
  EXPECT_EQ(templateClassName("gpu_probe-2"), "GpuProbe2");
  EXPECT_EQ(templateClassName("x"), "X");
}

TEST(PluginsNewTest, BadArgumentsAreUsageErrors) {
  std::ostringstream out;
  std::ostringstream err;
  EXPECT_EQ(runPluginsNew({"x"}, out, err), 64);
  EXPECT_NE(err.str().find("--kind is required"), std::string::npos) << err.str();
  err.str("");
  EXPECT_EQ(runPluginsNew({"--kind", "scheduler", "x"}, out, err), 64);
  EXPECT_NE(err.str().find("unknown kind 'scheduler'"), std::string::npos) << err.str();
  err.str("");
  EXPECT_EQ(runPluginsNew({"--kind", "runner", "My Runner"}, out, err), 64);
  EXPECT_NE(err.str().find("is not a plugin name"), std::string::npos) << err.str();
  err.str("");
  EXPECT_EQ(runPluginsNew({"--kind", "runner", "ok", "--templates", "/nonexistent", "--dir",
                           ::testing::TempDir() + "/plugins-new-none"},
                          out, err),
            2);
  EXPECT_NE(err.str().find("no template /nonexistent/plugin/CMakeLists.txt"), std::string::npos)
      << err.str();
}

}  // namespace
}  // namespace dockhand::agent
