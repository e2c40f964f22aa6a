#include "dockhand/base/logging.h"

#include <mutex>
#include <utility>
#include <vector>

#include <spdlog/spdlog.h>

namespace dockhand {

std::shared_ptr<spdlog::logger> logger(const std::string& name) {
  if (auto existing = spdlog::get(name)) return existing;
  // Creation only: two threads asking for a new name at once make one logger between them.
  static std::mutex mutex;
  std::lock_guard lock(mutex);
  if (auto existing = spdlog::get(name)) return existing;
  auto created = spdlog::default_logger()->clone(name);
  try {
    spdlog::register_logger(created);
  } catch (const spdlog::spdlog_ex&) {
    // Registered meanwhile by code that does not go through this function.
    if (auto existing = spdlog::get(name)) return existing;
  }
  return created;
}

void setDefaultLogger(std::shared_ptr<spdlog::logger> logger) {
  const std::string keep = logger->name();
  spdlog::set_default_logger(std::move(logger));
  std::vector<std::string> names;
  spdlog::apply_all([&](const std::shared_ptr<spdlog::logger>& l) {
    if (l->name() != keep) names.push_back(l->name());
  });
  for (const auto& name : names) spdlog::drop(name);
}

}  // namespace dockhand
