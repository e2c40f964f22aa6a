// The log formatters: JSON lines that parse (escapes, invalid UTF-8, the context's fields)
// and the text pattern's %& context.
#include "dockhand/base/log_format.h"

#include <chrono>
#include <string>

#include <gtest/gtest.h>
#include <spdlog/details/log_msg.h>
#include <nlohmann/json.hpp>

namespace dockhand {
namespace {

using nlohmann::json;

std::string formatted(spdlog::formatter& formatter, std::string_view logger, std::string_view text,
                      spdlog::level::level_enum level = spdlog::level::info) {
  spdlog::details::log_msg msg(spdlog::source_loc{},
                               spdlog::string_view_t(logger.data(), logger.size()), level,
                               spdlog::string_view_t(text.data(), text.size()));
  msg.time = spdlog::log_clock::time_point(std::chrono::microseconds(1796189413123456));
  spdlog::memory_buf_t out;
  formatter.format(msg, out);
  return {out.data(), out.size()};
}

TEST(LogFormatTest, JsonLineHasTheFieldsAndEndsTheLine) {
  auto formatter = makeLogFormatter(LogFormat::kJson, "", "exec-1");
  const std::string line = formatted(*formatter, "agent", "registered", spdlog::level::warn);
  ASSERT_FALSE(line.empty());
  EXPECT_EQ(line.back(), '\n');
  EXPECT_EQ(line.find('\n'), line.size() - 1);
  const json parsed = json::parse(line);
  EXPECT_EQ(parsed["timestamp"], "2026-12-02T05:30:13.123456Z");
  EXPECT_EQ(parsed["level"], "warning");
  EXPECT_EQ(parsed["logger"], "agent");
  EXPECT_EQ(parsed["message"], "registered");
  EXPECT_EQ(parsed["executor_id"], "exec-1");
  EXPECT_FALSE(parsed.contains("task_id"));
  EXPECT_FALSE(parsed.contains("plugin"));
}

TEST(LogFormatTest, JsonLineCarriesTheContextOfItsThread) {
  auto formatter = makeLogFormatter(LogFormat::kJson, "");
  EXPECT_FALSE(json::parse(formatted(*formatter, "driver", "x")).contains("executor_id"));
  {
    TaskLogScope task(18446744073709551615ULL, "agent-7");
    const json parsed = json::parse(formatted(*formatter, "plugin.process", "launched"));
    EXPECT_EQ(parsed["task_id"].get<std::uint64_t>(), 18446744073709551615ULL);
    EXPECT_EQ(parsed["executor_id"], "agent-7");
    EXPECT_EQ(parsed["plugin"], "process");
    {
      TaskLogScope inner(3);
      const json nested = json::parse(formatted(*formatter, "executor", "x"));
      EXPECT_EQ(nested["task_id"], 3);
      EXPECT_EQ(nested["executor_id"], "agent-7");
    }
    EXPECT_EQ(json::parse(formatted(*formatter, "executor", "x"))["task_id"].get<std::uint64_t>(),
              18446744073709551615ULL);
  }
  EXPECT_FALSE(currentLogContext().has_task);
  EXPECT_FALSE(json::parse(formatted(*formatter, "executor", "x")).contains("task_id"));
  ExecutorLogScope agent("a2");
  EXPECT_EQ(json::parse(formatted(*formatter, "driver", "x"))["executor_id"], "a2");
}

TEST(LogFormatTest, JsonEscapesControlCharactersAndReplacesInvalidUtf8) {
  auto formatter = makeLogFormatter(LogFormat::kJson, "");
  std::string message = "quote \" backslash \\ nl \n cr \r tab \t nul ";
  message += '\0';
  message += " bell \x07 del \x7f ok \xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80";
  message += " bad \xFF \xC3 \xE0\x80\x80 \xED\xA0\x80 \xF4\x90\x80\x80 end";
  const std::string line = formatted(*formatter, "log\"name", message);
  EXPECT_EQ(line.find('\n'), line.size() - 1) << line;
  const json parsed = json::parse(line);  // throws on invalid JSON or UTF-8
  EXPECT_EQ(parsed["logger"], "log\"name");
  const std::string back = parsed["message"];
  const std::string head =
      std::string("quote \" backslash \\ nl \n cr \r tab \t nul ") + '\0' + " bell \x07 del \x7f";
  EXPECT_EQ(back.substr(0, head.size()), head);
  EXPECT_NE(back.find("ok \xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80"), std::string::npos);
  EXPECT_NE(back.find("bad \xEF\xBF\xBD \xEF\xBF\xBD \xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"),
            std::string::npos)
      << back;
  EXPECT_NE(back.find(" end"), std::string::npos);

  std::string escaped;
  appendJsonString(
      "a\x01"
      "b",
      escaped);
  EXPECT_EQ(escaped, "\"a\\u0001b\"");
}

TEST(LogFormatTest, TextPatternShowsTheTaskWhereThereIsOne) {
  auto formatter = makeLogFormatter(LogFormat::kText, "%l %n%&: %v");
  EXPECT_EQ(formatted(*formatter, "agent", "up"), "info agent: up\n");
  TaskLogScope task(42);
  EXPECT_EQ(formatted(*formatter, "executor", "launched"), "info executor task_id=42: launched\n");
  ExecutorLogScope agent("a1");
  EXPECT_EQ(formatted(*formatter, "driver", "x"), "info driver task_id=42 executor_id=a1: x\n");
}

TEST(LogFormatTest, ParsesFormatNames) {
  EXPECT_EQ(parseLogFormat("json"), LogFormat::kJson);
  EXPECT_EQ(parseLogFormat("JSON"), LogFormat::kJson);
  EXPECT_EQ(parseLogFormat("text"), LogFormat::kText);
  EXPECT_FALSE(parseLogFormat("logfmt").has_value());
  EXPECT_FALSE(parseLogFormat("").has_value());
}

}  // namespace
}  // namespace dockhand
