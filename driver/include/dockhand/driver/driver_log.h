// The driver's one logger, "driver": stderr, coloured on a terminal, each line
// "<time> <level> dockhand-driver: <text>". Every part of the driver (the CLI, DriverService,
// AgentServer) logs through driverLogger(), which never returns null: the first call creates
// and registers the logger (thread-safe, once), so code that runs without the CLI's set-up
// (tests, an embedder) logs to the same place in the same format instead of dereferencing a
// missing logger.
//
// Why not the agent's logger("name") (agent/core/logging.h): that one clones the default
// logger, whose sinks the agent's main() sets up, and lives in an agent library. The
// libraries both programs link (protocol, tls) also go into plugins, which must never touch
// spdlog's globals, so the helper cannot move there; the driver owns its sink and pattern
// instead.
//
// Lifetime: the logger lives until exit (it stays registered with spdlog).
#pragma once

#include <memory>
#include <string>

namespace spdlog {
class logger;
}

namespace dockhand::driver {

// The "driver" logger, created on first use. Never null. Thread-safe.
const std::shared_ptr<spdlog::logger>& driverLogger();

// The CLI's set-up: makes the driver logger spdlog's default and sets its level ("info",
// "warn", ...: spdlog's names; the caller has checked them).
void setUpDriverLogging(const std::string& level);

}  // namespace dockhand::driver
