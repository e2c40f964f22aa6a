#include "task_end.h"

#include <time.h>

#include <exception>

#include <nlohmann/json.hpp>

namespace dockhand::plugins::library {
std::string describeTask(const TaskSpec& spec, const std::string& library_label) {
  return "task " + std::to_string(spec.task_id) + " (library " + library_label + ", function " +
         spec.function + ")";
}

namespace {

std::uint64_t threadCpuNanos() {
  timespec now{};
  if (::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now) != 0) return 0;
  return static_cast<std::uint64_t>(now.tv_sec) * 1'000'000'000U +
         static_cast<std::uint64_t>(now.tv_nsec);
}

TerminalReport firstReport(const TaskSpec& spec, const std::string& library_label,
                           const LibraryConfig& config, const TaskContext& context,
                           const FunctionReturn& returned,
                           const std::optional<std::string>& kill_reason,
                           std::uint64_t duration_ms) {
  if (kill_reason) return {DH_TASK_KILLED, reasonDetail(*kill_reason)};
  if (!returned.escaped.empty()) {
    return {DH_TASK_FAILED,
            reasonDetail("function '" + spec.function + "' of job library '" + library_label +
                         "' let an exception escape: " + returned.escaped)};
  }
  if (returned.status != DH_OK) {
    std::string reason = context.error();
    if (reason.empty()) {
      reason = "function '" + spec.function + "' of job library '" + library_label +
               "' returned status " + std::to_string(returned.status) + " without an error message";
    }
    return {DH_TASK_FAILED, reasonDetail(reason)};
  }
  return resultReport(spec, config, context.result(), duration_ms);
}

}  // namespace

FunctionReturn callFunction(dh_task_fn function, TaskContext& context) {
  FunctionReturn returned;
  if (!context.cancelled()) {
    const std::uint64_t cpu_before = threadCpuNanos();
    try {
      returned.status = function(TaskContext::api(), context.handle());
    } catch (const std::exception& e) {
      returned.escaped = e.what();
    } catch (...) {
      returned.escaped = "a non-standard exception";
    }
    const std::uint64_t cpu_after = threadCpuNanos();
    returned.cpu_time_ns = cpu_after > cpu_before ? cpu_after - cpu_before : 0;
  }
  context.finish();
  return returned;
}

TerminalReport endReport(const TaskSpec& spec, const std::string& library_label,
                         const LibraryConfig& config, const TaskContext& context,
                         const FunctionReturn& returned,
                         const std::optional<std::string>& kill_reason, std::uint64_t duration_ms) {
  TerminalReport report =
      firstReport(spec, library_label, config, context, returned, kill_reason, duration_ms);
  nlohmann::json metrics = {{"cpu_time_ms", returned.cpu_time_ns / 1'000'000U}};
  if (report.state == DH_TASK_FINISHED) metrics["result_bytes"] = context.result().size();
  report.detail["metrics"] = std::move(metrics);
  return report;
}

}  // namespace dockhand::plugins::library
