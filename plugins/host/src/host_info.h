// What this machine offers to tasks: its CPUs (online, in this process's affinity mask, and
// under the cgroup's CPU quota), its memory and the cgroup's memory limit, for cgroup v2 and
// v1. Roots are parameters so that tests can point them at a fake tree.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace dockhand::host {

struct HostRoots {
  std::string proc = "/proc";             // meminfo, self/cgroup
  std::string cgroup = "/sys/fs/cgroup";  // the cgroup file system mount
  bool use_affinity = true;               // read sched_getaffinity (off in tests)
  int online_cpus = 0;                    // 0: sysconf(_SC_NPROCESSORS_ONLN)
};

struct HostInfo {
  int online_cpus = 0;
  int affinity_cpus = 0;                      // CPUs this process may run on
  std::optional<double> cgroup_cpu_limit;     // quota / period, when a quota is set
  std::string cgroup_version;                 // "v2", "v1" or "" (none found)
  std::optional<std::uint64_t> memory_total;  // bytes, /proc/meminfo MemTotal
  std::optional<std::uint64_t> memory_available;
  std::optional<std::uint64_t> cgroup_memory_limit;  // bytes, when limited
  int effective_cpus = 1;  // min(affinity, ceil(cgroup quota)), at least 1

  nlohmann::json toJson() const;
};

HostInfo probeHost(const HostRoots& roots = {});

}  // namespace dockhand::host
