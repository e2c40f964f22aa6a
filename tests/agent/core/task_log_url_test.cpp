#include "core/task_log_url.h"

#include <cstdint>
#include <limits>

#include <gtest/gtest.h>

namespace dockhand::agent {
namespace {

TEST(TaskLogUrlPatternTest, PutsTheTaskAndStreamInTheirPlaceholders) {
  const TaskLogUrlPattern url("http://node-7:7337/v1/tasks/{task_id}/logs/{stream}");
  EXPECT_FALSE(url.empty());
  EXPECT_EQ(url.expand(42, "stdout"), "http://node-7:7337/v1/tasks/42/logs/stdout");
  EXPECT_EQ(url.expand(0, "stderr"), "http://node-7:7337/v1/tasks/0/logs/stderr");
  EXPECT_EQ(url.expand(std::numeric_limits<std::uint64_t>::max(), "stdout"),
            "http://node-7:7337/v1/tasks/18446744073709551615/logs/stdout");
}

TEST(TaskLogUrlPatternTest, EveryPlaceholderAnywhereAndNoOtherBraces) {
  EXPECT_EQ(TaskLogUrlPattern("{task_id}{stream}{task_id}").expand(7, "x"), "7x7");
  EXPECT_EQ(TaskLogUrlPattern("a{task}b{stream}c{task_id").expand(7, "err"),
            "a{task}berrc{task_id");
  EXPECT_EQ(TaskLogUrlPattern("{{task_id}}").expand(12, "out"), "{12}");
  EXPECT_EQ(TaskLogUrlPattern("http://h/static").expand(9, "stdout"), "http://h/static");
}

TEST(TaskLogUrlPatternTest, AnEmptyPatternIsEmpty) {
  EXPECT_TRUE(TaskLogUrlPattern().empty());
  EXPECT_TRUE(TaskLogUrlPattern("").empty());
  EXPECT_EQ(TaskLogUrlPattern().expand(1, "stdout"), "");
}

}  // namespace
}  // namespace dockhand::agent
