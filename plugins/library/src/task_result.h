// How a finished task's result travels (docs/plugins.md, the library runner): in the FINISHED
// detail when small (as text, or base64 when it is not UTF-8), as a block file in the task's
// output directory when larger, refused above the runner's maximum. Called on the task's
// thread after its function returned; no state.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "library_config.h"

namespace dockhand::plugins::library {

struct TerminalReport {
  std::int32_t state = 0;  // DH_TASK_FINISHED, DH_TASK_FAILED or DH_TASK_KILLED
  nlohmann::json detail;   // {"result": {...}} or {"reason": "..."}, and "metrics"
  // The detail as dh_host.task_status takes it (invalid UTF-8 replaced).
  std::string detailJson() const;
};

// The report for a task that returned DH_OK with `result`; may write
// <work_dir>/output/task_<id>_result.
TerminalReport resultReport(const TaskSpec& spec, const LibraryConfig& config,
                            const std::string& result, std::uint64_t duration_ms);

// Creates <work_dir> (0700, when the agent did not: DH_RUNNER_MAKES_WORK_DIR) and
// <work_dir>/output, as needed. Returns "" or why it could not.
std::string makeOutputDir(const std::string& work_dir);

// {"reason": "<reason>"}: the detail of a FAILED or KILLED task, and as JSON text (invalid
// UTF-8 replaced).
nlohmann::json reasonDetail(const std::string& reason);
std::string reasonJson(const std::string& reason);

// The id of the block a large result becomes: task_<task_id>_result.
std::string resultBlockId(std::uint64_t task_id);

}  // namespace dockhand::plugins::library
