// `dockhand-driver run --results-dir DIR`: each task's whole result, for a job author who
// needs more than the report's line (which cuts a value at 200 characters).
//
//   DIR/<task name>   the bytes of each FINISHED task's value: a process task's stdout, a
//                     library task's value (its "value_base64" decoded), byte for byte; another
//                     runner's result as text (report.h, otherResultText)
//   DIR/results.json  every task, in job order: name, outcome, agent, attempts, duration_ms,
//                     and "file" (the name of its value's file) or "reason"
//
// A task name is made a file name by replacing each character outside [A-Za-z0-9._-] with
// '_' (and "." or ".." with "_"); a name that is taken already gets "~<n>" after it.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "dockhand/base/result.h"
#include "dockhand/driver/scheduler.h"

namespace dockhand::driver {

// The file name a task's value is written to, before any "~<n>" that tells two apart.
std::string resultFileName(std::string_view task_name);

// Creates DIR (and its parents) when missing and writes the files above, replacing any of
// the same names. Returns how many value files it wrote, or what it could not write.
Result<std::size_t> writeResultsDir(const std::string& dir, const std::vector<TaskRecord>& tasks);

}  // namespace dockhand::driver
