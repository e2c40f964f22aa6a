// The one way the agent and the driver get a logger: logger("name"), a named logger per part
// ("agent", "link", "executor", "blocks", "driver", ...) that shares the default logger's
// sinks and level, so that one set-up (the program's, through setDefaultLogger) and one live
// level change (spdlog::set_level) reach every one of them.
//
// Never null: the first call for a name clones the default logger and registers the clone
// with spdlog; later calls return the registered one. Thread-safe. Call logger() where you log
// rather than keeping the pointer in a static: a program that replaces the default logger
// (setDefaultLogger) drops the clones made before, and the next call makes them again from
// the new sinks.
//
// Only the agent and the driver link this (dockhand_base): a plugin never touches spdlog's
// globals (each shared library would get its own registry); it logs through the host.
#pragma once

#include <memory>
#include <string>

#include <spdlog/logger.h>

namespace dockhand {

// The logger `name`, created from the default logger's sinks and level on first use.
std::shared_ptr<spdlog::logger> logger(const std::string& name);

// Makes `logger` spdlog's default (and registers it under its name) and drops every other
// registered logger, so that logger("x") clones the new one from now on. For a program's
// logging set-up, before it starts threads that log.
void setDefaultLogger(std::shared_ptr<spdlog::logger> logger);

}  // namespace dockhand
