// The job library of dockhand-bench: one task function that does nothing, so that the
// library runner's throughput measures the task path alone (launch, RUNNING, FINISHED).
#include "dockhand/job.hpp"

void noop(dockhand::job::Task& /*task*/) {}

DOCKHAND_JOB_LIBRARY("bench", "1.0.0", "No-op tasks for dockhand-bench", DOCKHAND_TASK(noop))
