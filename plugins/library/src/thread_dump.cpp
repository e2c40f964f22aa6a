#include "thread_dump.h"

namespace dockhand::plugins::library {

nlohmann::json dumpThread(const std::string& function, const std::string& library) {
  return {{"function", function}, {"library", library}, {"stack", nlohmann::json::array()}};
}

void putStack(nlohmann::json& into, const Result<std::vector<std::string>>& frames,
              bool still_running, const std::string& moved_on) {
  if (!frames) {
    into["error"] = frames.error().message;
  } else if (!still_running) {
    into["error"] = moved_on;
  } else {
    into["stack"] = *frames;
  }
}

std::string dumpText(std::uint64_t task_id, const nlohmann::json& thread) {
  const nlohmann::json dump = {{"task_id", task_id}, {"threads", nlohmann::json::array({thread})}};
  return dump.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace dockhand::plugins::library
