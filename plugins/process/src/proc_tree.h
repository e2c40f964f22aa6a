// Reads a process group's processes and threads from /proc, for thread dumps.
#pragma once

#include <sys/types.h>

#include <nlohmann/json.hpp>

namespace dockhand::plugins::process {

// Every process whose process group is `pgid`:
//   [{"pid": N, "ppid": N, "state": "S", "cmdline": ["sleep", "100"],
//     "threads": [{"tid": N, "name": "sleep", "state": "S", "wchan": "hrtimer_nanosleep",
//                  "syscall": "230 0x1 ..."}]}]
// "wchan"/"syscall" are omitted where /proc does not let us read them. Processes that vanish
// while being read are skipped.
nlohmann::json describeProcessGroup(pid_t pgid);

}  // namespace dockhand::plugins::process
