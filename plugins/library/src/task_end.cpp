#include "task_end.h"

#include <exception>

#include <nlohmann/json.hpp>

namespace dockhand::plugins::library {
std::string describeTask(const TaskSpec& spec, const std::string& library_label) {
  return "task " + std::to_string(spec.task_id) + " (library " + library_label + ", function " +
         spec.function + ")";
}

FunctionReturn callFunction(dh_task_fn function, TaskContext& context) {
  FunctionReturn returned;
  if (!context.cancelled()) {
    try {
      returned.status = function(TaskContext::api(), context.handle());
    } catch (const std::exception& e) {
      returned.escaped = e.what();
    } catch (...) {
      returned.escaped = "a non-standard exception";
    }
  }
  context.finish();
  return returned;
}

TerminalReport endReport(const TaskSpec& spec, const std::string& library_label,
                         const LibraryConfig& config, const TaskContext& context,
                         const FunctionReturn& returned,
                         const std::optional<std::string>& kill_reason, std::uint64_t duration_ms) {
  if (kill_reason) return {DH_TASK_KILLED, reasonJson(*kill_reason)};
  if (!returned.escaped.empty()) {
    return {DH_TASK_FAILED,
            reasonJson("function '" + spec.function + "' of job library '" + library_label +
                       "' let an exception escape: " + returned.escaped)};
  }
  if (returned.status != DH_OK) {
    std::string reason = context.error();
    if (reason.empty()) {
      reason = "function '" + spec.function + "' of job library '" + library_label +
               "' returned status " + std::to_string(returned.status) + " without an error message";
    }
    return {DH_TASK_FAILED, reasonJson(reason)};
  }
  return resultReport(spec, config, context.result(), duration_ms);
}

}  // namespace dockhand::plugins::library
