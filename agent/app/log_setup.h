// Logging for the agent program: spdlog to stderr, a live level control for the Backend.
#pragma once

#include <optional>
#include <string_view>

#include <spdlog/common.h>

#include "core/ports.h"

namespace dockhand::agent {

// Level names the agent accepts, case-insensitive: trace, debug, info, warn (warning), error,
// critical (fatal), off, and log4j's all. nullopt for anything else.
std::optional<spdlog::level::level_enum> parseLogLevel(std::string_view name);

// Sets up the default logger on stderr (setDefaultLogger: the named loggers of logger("x")
// share it). Under systemd (JOURNAL_STREAM set) lines carry no timestamp, since the journal
// adds its own.
void setupLogging(spdlog::level::level_enum level);

class SpdlogLevelControl final : public LogControl {
 public:
  bool setLevel(std::string_view level) override;
};

}  // namespace dockhand::agent
