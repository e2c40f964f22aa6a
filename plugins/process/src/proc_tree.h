// Reads a process group's processes and threads from /proc, for thread dumps, and the numbers
// of /proc's "key: value" texts for the runner's other reads.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>

#include <nlohmann/json.hpp>

namespace dockhand::plugins::process {

// Every process whose process group is `pgid`:
//   [{"pid": N, "ppid": N, "state": "S", "cmdline": ["sleep", "100"],
//     "threads": [{"tid": N, "name": "sleep", "state": "S", "wchan": "hrtimer_nanosleep",
//                  "syscall": "230 0x1 ..."}]}]
// "wchan"/"syscall" are omitted where /proc does not let us read them. Processes that vanish
// while being read are skipped.
nlohmann::json describeProcessGroup(pid_t pgid);

// Who a process is, from /proc/<pid>/stat: its parent and its start time (clock ticks since
// boot, field 22), which with the pid names one process for the life of the machine (a pid
// is reused, a pid and start time are not). nullopt when the process is gone (a zombie is
// still there).
struct ProcessIdentity {
  pid_t ppid = 0;
  unsigned long long start_ticks = 0;
};
std::optional<ProcessIdentity> readProcessIdentity(pid_t pid);

// The number after `key` in a NUL-terminated /proc text ("rchar: 123" in /proc/<pid>/io,
// "SigCgt:\t0000000000000002" in /proc/<pid>/status), read in `base`; nullopt when `key` is
// not there or no digit follows it.
std::optional<std::uint64_t> numberAfter(const char* text, const char* key, int base);

}  // namespace dockhand::plugins::process
