#include "dockhand/driver/driver_log.h"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

namespace dockhand::driver {
namespace {

constexpr const char* kLoggerName = "driver";
constexpr const char* kPattern = "%Y-%m-%dT%H:%M:%S.%e %^%l%$ dockhand-driver: %v";

std::shared_ptr<spdlog::logger> createDriverLogger() {
  if (auto existing = spdlog::get(kLoggerName)) return existing;
  std::shared_ptr<spdlog::logger> created;
  try {
    created = spdlog::stderr_color_mt(kLoggerName);
  } catch (const spdlog::spdlog_ex&) {
    if (auto existing = spdlog::get(kLoggerName)) return existing;  // registered meanwhile
    throw;
  }
  created->set_pattern(kPattern);
  return created;
}

}  // namespace

const std::shared_ptr<spdlog::logger>& driverLogger() {
  static const std::shared_ptr<spdlog::logger> kLogger = createDriverLogger();
  return kLogger;
}

void setUpDriverLogging(const std::string& level) {
  const auto& logger = driverLogger();
  spdlog::set_default_logger(logger);
  logger->set_level(spdlog::level::from_str(level));
}

}  // namespace dockhand::driver
