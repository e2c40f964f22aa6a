#include "dockhand/base/config_error.h"

#include <gtest/gtest.h>

namespace dockhand {
namespace {

TEST(ConfigErrorTest, TextIsWhatItWasGiven) {
  ConfigError e("job.json: /tasks/0: expected an object");
  EXPECT_STREQ(e.what(), "job.json: /tasks/0: expected an object");
  ASSERT_EQ(e.problems().size(), 1u);
  EXPECT_EQ(e.problems()[0].message, "job.json: /tasks/0: expected an object");
  EXPECT_TRUE(e.problems()[0].origin.empty());
}

TEST(ConfigErrorTest, ProblemsAreOneALineLeavingOutEmptyParts) {
  ConfigError e({ConfigProblem{"agent.json", "/cores", "expected an integer"},
                 ConfigProblem{"env:DOCKHAND_CORES", "", "expected a positive integer"},
                 ConfigProblem{"", "/app_id", "is required"}});
  EXPECT_STREQ(e.what(),
               "agent.json: /cores: expected an integer\n"
               "env:DOCKHAND_CORES: expected a positive integer\n"
               "/app_id: is required");
  ASSERT_EQ(e.problems().size(), 3u);
  EXPECT_EQ(e.problems()[1].origin, "env:DOCKHAND_CORES");
}

TEST(ConfigErrorTest, IsARuntimeError) {
  try {
    throw ConfigError("bad");
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "bad");
    return;
  }
  FAIL() << "not caught as a std::runtime_error";
}

}  // namespace
}  // namespace dockhand
