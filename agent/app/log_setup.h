// Logging for the agent program: spdlog to stderr, a live level control for the Backend.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <spdlog/common.h>

#include "core/ports.h"
#include "dockhand/base/log_format.h"

namespace dockhand::agent {

// Level names the agent accepts, case-insensitive: trace, debug, info, warn (warning), error,
// critical (fatal), off, and log4j's all. nullopt for anything else.
std::optional<spdlog::level::level_enum> parseLogLevel(std::string_view name);

// Sets up the default logger on stderr (setDefaultLogger: the named loggers of logger("x")
// share it). Under systemd (JOURNAL_STREAM set) lines carry no timestamp, since the journal
// adds its own.
// `format`: text, or JSON lines (dockhand/base/log_format.h) whose executor_id is
// `executor_id` unless a line's context names another.
void setupLogging(spdlog::level::level_enum level, LogFormat format = LogFormat::kText,
                  const std::string& executor_id = {});

class SpdlogLevelControl final : public LogControl {
 public:
  bool setLevel(std::string_view level) override;
};

}  // namespace dockhand::agent
