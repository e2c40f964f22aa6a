#include "dockhand/driver/driver_log.h"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "dockhand/base/log_format.h"
#include "dockhand/base/logging.h"

namespace dockhand::driver {
namespace {

constexpr const char* kLoggerName = "driver";
// %&: the line's task and agent where it is about one.
constexpr const char* kPattern = "%Y-%m-%dT%H:%M:%S.%e %^%l%$ dockhand-driver%&: %v";

}  // namespace

void setUpDriverLogging(const std::string& level, const std::string& format) {
  auto sink = std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
  auto created = std::make_shared<spdlog::logger>(kLoggerName, std::move(sink));
  created->set_formatter(
      makeLogFormatter(parseLogFormat(format).value_or(LogFormat::kText), kPattern));
  created->set_level(spdlog::level::from_str(level));
  setDefaultLogger(created);
}

}  // namespace dockhand::driver
