// How a task function's call ends, and the terminal report that follows: the same for a task
// on a thread of the agent (library_runner.h) and one in a worker process (worker_main.cpp).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "dockhand/job.h"
#include "library_config.h"
#include "task_context.h"
#include "task_result.h"

namespace dockhand::plugins::library {

struct FunctionReturn {
  dh_status status = DH_ERROR;
  std::string escaped;            // what an exception that escaped the function said, or ""
  std::uint64_t cpu_time_ns = 0;  // the calling thread's CPU time in the call
};

// "task 7 (library l, function f)", for messages.
std::string describeTask(const TaskSpec& spec, const std::string& library_label);

// Calls `function` on this thread unless the task was cancelled first, then finishes the
// context (no more kill callbacks; inputs unmapped, outputs closed).
FunctionReturn callFunction(dh_task_fn function, TaskContext& context);

// The terminal report: KILLED with `kill_reason` when the task was killed, FAILED for an
// escaped exception or a status other than DH_OK, else the result's (task_result.h); with its
// "metrics" (the call's CPU time, and the result's size when it finished).
TerminalReport endReport(const TaskSpec& spec, const std::string& library_label,
                         const LibraryConfig& config, const TaskContext& context,
                         const FunctionReturn& returned,
                         const std::optional<std::string>& kill_reason, std::uint64_t duration_ms);

}  // namespace dockhand::plugins::library
