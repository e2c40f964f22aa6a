#include "host_info.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>
#include <vector>

namespace dockhand::host {
namespace {

std::optional<std::string> readFirstLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line)) return std::nullopt;
  return line;
}

std::optional<std::uint64_t> parseUnsigned(const std::string& text) {
  std::istringstream in(text);
  std::uint64_t value = 0;
  if (!(in >> value)) return std::nullopt;
  return value;
}

// The cgroup paths this process is in, from <proc>/self/cgroup: the v2 path ("0::/x") and
// the v1 paths by controller ("4:cpu,cpuacct:/x").
struct SelfCgroup {
  std::string v2 = "/";
  std::string cpu_v1 = "/";
  std::string memory_v1 = "/";
};

SelfCgroup readSelfCgroup(const std::string& proc) {
  SelfCgroup self;
  std::ifstream in(proc + "/self/cgroup");
  for (std::string line; std::getline(in, line);) {
    const auto first = line.find(':');
    const auto second = line.find(':', first + 1);
    if (first == std::string::npos || second == std::string::npos) continue;
    const std::string controllers = line.substr(first + 1, second - first - 1);
    const std::string path = line.substr(second + 1);
    if (controllers.empty()) self.v2 = path;
    std::istringstream names(controllers);
    for (std::string name; std::getline(names, name, ',');) {
      if (name == "cpu") self.cpu_v1 = path;
      if (name == "memory") self.memory_v1 = path;
    }
  }
  return self;
}

// The first of the candidates that exists: the process's own cgroup, then the mount's root
// (a container sees its own cgroup as the root).
std::optional<std::string> readCgroupFile(const std::vector<std::string>& candidates) {
  for (const auto& path : candidates) {
    if (auto line = readFirstLine(path)) return line;
  }
  return std::nullopt;
}

std::string join(const std::string& root, const std::string& path, const std::string& file) {
  std::string out = root;
  if (!path.empty() && path != "/") out += path;
  return out + "/" + file;
}

// Unlimited cgroup v1 memory is reported as a page-rounded LONG_MAX.
constexpr std::uint64_t kUnlimitedV1 = 1ull << 62;

}  // namespace

HostInfo probeHost(const HostRoots& roots) {
  HostInfo info;
  info.online_cpus = roots.online_cpus > 0
                         ? roots.online_cpus
                         : static_cast<int>(std::max(1L, ::sysconf(_SC_NPROCESSORS_ONLN)));
  info.affinity_cpus = info.online_cpus;
  if (roots.use_affinity) {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (::sched_getaffinity(0, sizeof set, &set) == 0) {
      info.affinity_cpus = std::max(1, CPU_COUNT(&set));
    }
  }

  std::ifstream meminfo(roots.proc + "/meminfo");
  for (std::string line; std::getline(meminfo, line);) {
    std::istringstream fields(line);
    std::string key;
    std::uint64_t kib = 0;
    if (!(fields >> key >> kib)) continue;
    if (key == "MemTotal:") info.memory_total = kib * 1024;
    if (key == "MemAvailable:") info.memory_available = kib * 1024;
  }

  const SelfCgroup self = readSelfCgroup(roots.proc);
  const std::string& cg = roots.cgroup;
  // cgroup v2: the tightest limit on the way from the process's own cgroup up to the root
  // (a parent's cpu.max and memory.max bound its children too).
  std::vector<std::string> v2_dirs;
  for (std::string path = self.v2;;) {
    v2_dirs.push_back(join(cg, path, ""));
    if (path.empty() || path == "/") break;
    const auto slash = path.find_last_of('/');
    path = slash == 0 || slash == std::string::npos ? "/" : path.substr(0, slash);
  }
  for (const auto& dir : v2_dirs) {
    if (auto cpu_max = readFirstLine(dir + "cpu.max")) {
      info.cgroup_version = "v2";
      std::istringstream fields(*cpu_max);
      std::string quota;
      std::uint64_t period = 0;
      if (fields >> quota >> period && quota != "max" && period > 0) {
        if (auto q = parseUnsigned(quota)) {
          const auto limit = static_cast<double>(*q) / static_cast<double>(period);
          if (!info.cgroup_cpu_limit || limit < *info.cgroup_cpu_limit) {
            info.cgroup_cpu_limit = limit;
          }
        }
      }
    }
    if (auto memory_max = readFirstLine(dir + "memory.max")) {
      info.cgroup_version = "v2";
      if (*memory_max != "max") {
        auto limit = parseUnsigned(*memory_max);
        if (limit && (!info.cgroup_memory_limit || *limit < *info.cgroup_memory_limit)) {
          info.cgroup_memory_limit = limit;
        }
      }
    }
  }
  if (info.cgroup_version.empty()) {
    for (const std::string dir : {"cpu", "cpu,cpuacct"}) {
      const std::string base = join(cg, "", dir);
      auto quota = readCgroupFile(
          {join(base, self.cpu_v1, "cpu.cfs_quota_us"), join(base, "/", "cpu.cfs_quota_us")});
      auto period = readCgroupFile(
          {join(base, self.cpu_v1, "cpu.cfs_period_us"), join(base, "/", "cpu.cfs_period_us")});
      if (!quota || !period) continue;
      info.cgroup_version = "v1";
      auto p = parseUnsigned(*period);
      if (quota->rfind('-', 0) != 0 && p && *p > 0) {  // -1: no quota
        if (auto q = parseUnsigned(*quota)) {
          info.cgroup_cpu_limit = static_cast<double>(*q) / static_cast<double>(*p);
        }
      }
      break;
    }
    const std::string base = cg + "/memory";
    if (auto limit = readCgroupFile({join(base, self.memory_v1, "memory.limit_in_bytes"),
                                     join(base, "/", "memory.limit_in_bytes")})) {
      info.cgroup_version = "v1";
      auto value = parseUnsigned(*limit);
      if (value && *value < kUnlimitedV1) info.cgroup_memory_limit = value;
    }
  }

  info.effective_cpus = info.affinity_cpus;
  if (info.cgroup_cpu_limit) {
    const int quota_cpus = std::max(1, static_cast<int>(std::ceil(*info.cgroup_cpu_limit)));
    info.effective_cpus = std::min(info.effective_cpus, quota_cpus);
  }
  info.effective_cpus = std::max(1, info.effective_cpus);
  return info;
}

nlohmann::json HostInfo::toJson() const {
  auto optional = [](const auto& value) -> nlohmann::json {
    if (value) return *value;
    return nullptr;
  };
  return {
      {"cores",
       {{"online", online_cpus},
        {"affinity", affinity_cpus},
        {"cgroup_limit", optional(cgroup_cpu_limit)},
        {"effective", effective_cpus}}},
      {"memory",
       {{"total_bytes", optional(memory_total)},
        {"available_bytes", optional(memory_available)},
        {"cgroup_limit_bytes", optional(cgroup_memory_limit)}}},
      {"cgroup", cgroup_version.empty() ? nlohmann::json(nullptr) : nlohmann::json(cgroup_version)},
  };
}

}  // namespace dockhand::host
