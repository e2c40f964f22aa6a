// The driver's logging set-up: one stderr logger named "driver", coloured on a terminal, each
// line "<time> <level> dockhand-driver: <text>", made spdlog's default by the CLI before it
// starts anything. Every part of the driver (the CLI, DriverService, AgentServer) logs through
// logger("driver") (dockhand/base/logging.h, the helper the agent uses too), which never
// returns null: code that runs without the CLI's set-up (tests, an embedder) gets a clone of
// whatever default logger there is.
//
// Lifetime: the logger lives until exit (it stays registered with spdlog).
#pragma once

#include <string>

namespace dockhand::driver {

// The CLI's set-up: makes the "driver" logger spdlog's default and sets its level ("info",
// "warn", ...: spdlog's names; the caller has checked them) and its format ("text" or "json",
// dockhand/base/log_format.h; checked too). Call it before starting threads.
void setUpDriverLogging(const std::string& level, const std::string& format = "text");

}  // namespace dockhand::driver
