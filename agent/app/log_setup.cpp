#include "app/log_setup.h"

#include <cctype>
#include <cstdlib>
#include <string>

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include "dockhand/base/logging.h"

namespace dockhand::agent {

std::optional<spdlog::level::level_enum> parseLogLevel(std::string_view name) {
  std::string lower;
  for (char c : name) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower == "trace" || lower == "all") return spdlog::level::trace;
  if (lower == "debug") return spdlog::level::debug;
  if (lower == "info") return spdlog::level::info;
  if (lower == "warn" || lower == "warning") return spdlog::level::warn;
  if (lower == "error") return spdlog::level::err;
  if (lower == "critical" || lower == "fatal") return spdlog::level::critical;
  if (lower == "off") return spdlog::level::off;
  return std::nullopt;
}

void setupLogging(spdlog::level::level_enum level, LogFormat format,
                  const std::string& executor_id) {
  auto sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();
  auto logger = std::make_shared<spdlog::logger>("dockhand", sink);
  const char* journal = std::getenv("JOURNAL_STREAM");
  const bool under_journal = journal != nullptr && *journal != '\0';
  // %&: the line's task (and executor) where it is about one.
  logger->set_formatter(makeLogFormatter(
      format, under_journal ? "%l %n%&: %v" : "%Y-%m-%d %H:%M:%S.%e %^%l%$ %n%&: %v", executor_id));
  logger->set_level(level);
  setDefaultLogger(logger);
  spdlog::set_level(level);
}

bool SpdlogLevelControl::setLevel(std::string_view level) {
  auto parsed = parseLogLevel(level);
  if (!parsed) return false;
  spdlog::set_level(*parsed);  // every registered logger, the named ones included
  return true;
}

}  // namespace dockhand::agent
