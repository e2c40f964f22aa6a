#include "dockhand/driver/report.h"

#include <gtest/gtest.h>

namespace dockhand::driver {
namespace {

TaskRecord finished(const std::string& name, const std::string& out) {
  TaskRecord t;
  t.spec.name = name;
  t.outcome = TaskOutcome::kFinished;
  t.launches = 1;
  t.agent_id = "agent-1";
  t.result = {{"exit_code", 0}, {"stdout", out}, {"stdout_truncated", false}};
  return t;
}

TEST(ReportTest, SumsNumericStdoutAndNamesTheRest) {
  std::vector<TaskRecord> tasks = {finished("a", "  120\n"), finished("b", "3"),
                                   finished("c", "n/a\n")};
  SumResult sum = sumStdout(tasks);
  EXPECT_EQ(sum.sum, 123);
  EXPECT_EQ(sum.numeric, 2u);
  EXPECT_EQ(sum.not_numeric, std::vector<std::string>{"c"});
}

TEST(ReportTest, TaskLineShowsStateAgentAttemptsAndTrimmedStdout) {
  std::string line = formatTaskLine(finished("part-1", "line one\nline two\n"), 8);
  EXPECT_NE(line.find("part-1"), std::string::npos);
  EXPECT_NE(line.find("FINISHED"), std::string::npos);
  EXPECT_NE(line.find("agent-1"), std::string::npos);
  EXPECT_NE(line.find("attempts=1"), std::string::npos);
  EXPECT_NE(line.find("line one | line two"), std::string::npos);
}

TEST(ReportTest, NumbersPrintWithoutNeedlessDecimals) {
  EXPECT_EQ(formatNumber(1234567), "1234567");
  EXPECT_EQ(formatNumber(2.5), "2.5");
}

}  // namespace
}  // namespace dockhand::driver
