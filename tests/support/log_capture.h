// LogCapture: collects what one of the agent's named loggers (dockhand/base/logging.h) writes, at
// every level, while it lives, so that a test can assert on the log.
//
// Threading and lifetime: create it on the test's thread before the code under test logs; the
// destructor removes its sink and restores the logger's level. Header-only.
#pragma once

#include <algorithm>
#include <memory>
#include <sstream>
#include <string>

#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include "dockhand/base/logging.h"

namespace dockhand::agent::fakes {

class LogCapture {
 public:
  explicit LogCapture(const std::string& name = "agent")
      : logger_(logger(name)),
        sink_(std::make_shared<spdlog::sinks::ostream_sink_mt>(stream_)),
        old_level_(logger_->level()) {
    logger_->sinks().push_back(sink_);
    logger_->set_level(spdlog::level::trace);
  }
  LogCapture(const LogCapture&) = delete;
  LogCapture& operator=(const LogCapture&) = delete;
  ~LogCapture() {
    auto& sinks = logger_->sinks();
    sinks.erase(std::remove(sinks.begin(), sinks.end(), sink_), sinks.end());
    logger_->set_level(old_level_);
  }
  std::string text() const {
    logger_->flush();
    return stream_.str();
  }

 private:
  std::ostringstream stream_;
  std::shared_ptr<spdlog::logger> logger_;
  std::shared_ptr<spdlog::sinks::ostream_sink_mt> sink_;
  spdlog::level::level_enum old_level_;
};

}  // namespace dockhand::agent::fakes
