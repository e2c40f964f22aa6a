// What a process task used, for its terminal status's "metrics" (plugin.h, task_status): the
// kernel's resource usage of every process of its tree the runner reaped (wait4), and the
// bytes its leader's tree read and wrote (/proc/<pid>/io, read while the leader is a zombie:
// it then holds what its reaped children did too).
//
// Peak memory has a catch: a process started by a clone sharing the parent's memory (as the
// runner's, and posix_spawn's) has its ru_maxrss raised, at its exec, to the high-water mark of the
// process that spawned it: the agent's. So a wait4 peak at or below the agent's own peak
// (VmHWM, read when the task ends: it only grows) may be the agent's, not the task's; such a
// figure is replaced by the largest VmHWM sampled from the task's leader while it ran, or left
// out when there is no sample. A peak above the agent's is the task's own.
#pragma once

#include <sys/resource.h>
#include <sys/types.h>

#include <cstdint>
#include <optional>

#include <nlohmann/json.hpp>

namespace dockhand::plugins::process {

struct TaskUsage {
  std::uint64_t cpu_us = 0;                  // user + system
  std::uint64_t peak_rss_kib = 0;            // the largest of the processes' ru_maxrss
  bool measured = false;                     // at least one wait4 gave its usage
  std::optional<std::uint64_t> read_bytes;   // /proc/<pid>/io rchar
  std::optional<std::uint64_t> write_bytes;  // wchar

  // Adds one reaped process's usage (its own and its reaped descendants').
  void add(const rusage& usage);
  // {"cpu_time_ms": N, "peak_rss_bytes": N, "io_read_bytes": N, "io_write_bytes": N}: what
  // was measured. `spawner_peak_kib`: the spawning process's VmHWM now; `sampled_peak_kib`:
  // the largest VmHWM sampled from the leader, 0 for none (see above).
  nlohmann::json toMetrics(std::uint64_t spawner_peak_kib, std::uint64_t sampled_peak_kib) const;
};

// rchar and wchar of /proc/<pid>/io; nullopt when it cannot be read (another user's process
// without the privilege to look, a kernel without task I/O accounting).
struct ProcessIo {
  std::uint64_t read_bytes = 0;
  std::uint64_t write_bytes = 0;
};
std::optional<ProcessIo> readProcessIo(pid_t pid);

// VmHWM of /proc/<pid>/status in KiB; 0 when it cannot be read (the process is gone, or a
// zombie, which has no memory left).
std::uint64_t readPeakRssKib(pid_t pid);
// This process's peak resident memory in KiB (getrusage: no file to read on a task's end).
std::uint64_t ownPeakRssKib();

}  // namespace dockhand::plugins::process
