#include "dockhand/base/logging.h"

#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

namespace dockhand {
namespace {

using ::testing::HasSubstr;

// Installs a default logger writing to a string for one test, and puts the previous one back.
class LoggingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    previous_ = spdlog::default_logger();
    auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(out_);
    auto capture = std::make_shared<spdlog::logger>("logging-test", sink);
    capture->set_pattern("%n %l %v");
    capture->set_level(spdlog::level::info);
    setDefaultLogger(capture);
  }
  void TearDown() override { setDefaultLogger(previous_); }

  std::ostringstream out_;
  std::shared_ptr<spdlog::logger> previous_;
};

TEST_F(LoggingTest, NamedLoggerWritesToTheDefaultSinks) {
  logger("part-a")->info("hello");
  EXPECT_THAT(out_.str(), HasSubstr("part-a info hello"));
}

TEST_F(LoggingTest, SameNameIsTheSameLogger) {
  auto first = logger("part-b");
  auto second = logger("part-b");
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(first, second);
}

TEST_F(LoggingTest, NamedLoggerTakesTheDefaultLevelAndLiveChanges) {
  auto named = logger("part-c");
  EXPECT_EQ(named->level(), spdlog::level::info);
  named->debug("hidden");
  EXPECT_EQ(out_.str().find("hidden"), std::string::npos);
  spdlog::set_level(spdlog::level::debug);
  EXPECT_EQ(named->level(), spdlog::level::debug);
  spdlog::set_level(spdlog::level::info);
}

TEST_F(LoggingTest, ReplacingTheDefaultRemakesNamedLoggersFromItsSinks) {
  auto before = logger("part-d");
  std::ostringstream other;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(other);
  auto replacement = std::make_shared<spdlog::logger>("logging-test-2", sink);
  replacement->set_pattern("%n %v");
  setDefaultLogger(replacement);
  logger("part-d")->info("after");
  EXPECT_NE(logger("part-d"), before);
  EXPECT_THAT(other.str(), HasSubstr("part-d after"));
  EXPECT_EQ(out_.str().find("after"), std::string::npos);
}

TEST_F(LoggingTest, DefaultLoggerIsFoundByItsOwnName) {
  EXPECT_EQ(logger("logging-test"), spdlog::default_logger());
}

}  // namespace
}  // namespace dockhand
