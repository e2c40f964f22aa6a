// Named loggers per part ("agent", "link", "executor", "plugin.<name>"), all sharing the
// sinks of the default logger, so that a live level change reaches every one of them.
#pragma once

#include <memory>
#include <string>

#include <spdlog/spdlog.h>

namespace dockhand::agent {

// Returns the logger `name`, creating it from the default logger's sinks and level on first
// use. Thread-safe.
std::shared_ptr<spdlog::logger> logger(const std::string& name);

}  // namespace dockhand::agent
