// The job library of the benchmarks: task functions that do (almost) nothing, so that a
// measurement sees the task path alone (launch, RUNNING, FINISHED).
//   noop  nothing at all;
//   fill  writes 16 KiB to the output block rdd_1_<partition> (the job file declares it), so
//         that the agent holds a block afterwards (dockhand-fleet-bench decommissions agents
//         that hold some).
#include <cstddef>
#include <string>

#include "dockhand/job.hpp"

void noop(dockhand::job::Task& /*task*/) {}

void fill(dockhand::job::Task& task) {
  static const std::string kBytes(std::size_t{16} * 1024, 'x');
  task.write("rdd_1_" + std::to_string(task.partition()), kBytes);
}

DOCKHAND_JOB_LIBRARY("bench", "1.0.0", "No-op tasks for the benchmarks", DOCKHAND_TASK(noop),
                     DOCKHAND_TASK(fill))
