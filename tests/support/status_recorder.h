// Records what a runner reports through its status callback, and waits (bounded) for it.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "dockhand/plugin.h"

namespace dockhand::testing {

struct Report {
  std::int32_t state = 0;
  nlohmann::json detail;
};

class StatusRecorder {
 public:
  void record(std::uint64_t task_id, std::int32_t state, std::string_view detail_json) {
    Report report{state,
                  detail_json.empty() ? nlohmann::json() : nlohmann::json::parse(detail_json)};
    {
      std::lock_guard lock(mutex_);
      reports_[task_id].push_back(std::move(report));
    }
    changed_.notify_all();
  }

  // A callback that feeds this recorder.
  auto callback() {
    return [this](std::uint64_t id, std::int32_t state, std::string_view detail) {
      record(id, state, detail);
    };
  }

  // The task's terminal report, or nullopt if none came within `timeout`.
  std::optional<Report> waitTerminal(std::uint64_t task_id,
                                     std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    std::unique_lock lock(mutex_);
    std::optional<Report> found;
    changed_.wait_for(lock, timeout, [&] {
      for (const auto& r : reports_[task_id]) {
        if (r.state != DH_TASK_RUNNING) {
          found = r;
          return true;
        }
      }
      return false;
    });
    return found;
  }

  std::vector<Report> reports(std::uint64_t task_id) {
    std::lock_guard lock(mutex_);
    return reports_[task_id];
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::uint64_t, std::vector<Report>> reports_;
};

}  // namespace dockhand::testing
