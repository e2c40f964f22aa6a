// What a process uses, from /proc: for the standard process_* series every Prometheus client
// exports (processMetricsText), and for the figures the agent sends in its heartbeats.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>

namespace dockhand::metrics {

struct ProcessStats {
  double cpu_seconds = 0;                 // user + system, all threads
  std::uint64_t rss_bytes = 0;            // resident now
  std::uint64_t peak_rss_bytes = 0;       // VmHWM: the most it was resident, ever
  std::uint64_t virtual_bytes = 0;        // address space
  double started_after_boot_seconds = 0;  // its start, seconds after the machine booted
  std::uint64_t threads = 0;
};

// The stats of process `pid` (0: this process); nullopt when /proc cannot tell (it is gone).
std::optional<ProcessStats> readProcessStats(pid_t pid = 0);

// The resident bytes of every live descendant of `root` (its children, theirs, ...; not root
// itself), summed: what the tasks an agent started hold. Walks down from `root` through each
// thread's /proc/<pid>/task/<tid>/children list, so it reads only the tree (an idle agent: a
// dozen small files), not every process of the machine; where the kernel has no children lists
// it makes one pass over /proc instead.
std::uint64_t descendantsRssBytes(pid_t root);

// This process's open descriptors and its limit (RLIMIT_NOFILE soft limit).
std::uint64_t openFds();
std::uint64_t maxFds();

// process_cpu_seconds_total, process_resident_memory_bytes, process_virtual_memory_bytes,
// process_start_time_seconds, process_open_fds, process_max_fds and process_threads of this
// process, read now, in the text exposition format (the names and types of the Prometheus
// client libraries, so that existing dashboards and alerts work).
std::string processMetricsText();

}  // namespace dockhand::metrics
