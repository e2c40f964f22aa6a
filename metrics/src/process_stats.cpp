#include "dockhand/metrics/process_stats.h"

#include <dirent.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <fmt/format.h>

namespace dockhand::metrics {

namespace {

std::string procPath(pid_t pid, const char* file) {
  return pid == 0 ? fmt::format("/proc/self/{}", file) : fmt::format("/proc/{}/{}", pid, file);
}

// The fields of /proc/<pid>/stat after the command (whose name may hold spaces and
// parentheses): fields[0] is field 3 (state), fields[1] field 4 (ppid), and so on.
std::optional<std::vector<std::string>> statFields(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  if (!std::getline(in, line)) return std::nullopt;
  const auto close = line.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream rest(line.substr(close + 1));
  std::vector<std::string> fields;
  for (std::string field; rest >> field;) fields.push_back(field);
  if (fields.size() < 22) return std::nullopt;
  return fields;
}

std::uint64_t number(const std::string& text) { return std::strtoull(text.c_str(), nullptr, 10); }

double bootTimeSeconds() {
  std::ifstream in("/proc/stat");
  for (std::string key; in >> key;) {
    if (key == "btime") {
      double value = 0;
      in >> value;
      return value;
    }
    in.ignore(1 << 20, '\n');
  }
  return 0;
}

}  // namespace

std::optional<ProcessStats> readProcessStats(pid_t pid) {
  const auto fields = statFields(procPath(pid, "stat"));
  if (!fields) return std::nullopt;
  const auto ticks = static_cast<double>(::sysconf(_SC_CLK_TCK));
  const auto page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
  ProcessStats stats;
  // Fields 14 and 15 (utime, stime), 20 (num_threads), 22 (starttime), 23 (vsize), 24 (rss).
  stats.cpu_seconds = static_cast<double>(number((*fields)[11]) + number((*fields)[12])) / ticks;
  stats.threads = number((*fields)[17]);
  stats.started_after_boot_seconds = static_cast<double>(number((*fields)[19])) / ticks;
  stats.virtual_bytes = number((*fields)[20]);
  stats.rss_bytes = number((*fields)[21]) * page;
  std::ifstream status(procPath(pid, "status"));
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("VmHWM:", 0) == 0) {
      stats.peak_rss_bytes = number(line.substr(6)) * 1024;  // "VmHWM:   1234 kB"
      break;
    }
  }
  if (stats.peak_rss_bytes < stats.rss_bytes) stats.peak_rss_bytes = stats.rss_bytes;
  return stats;
}

namespace {

// The children of every thread of `pid`, appended to `out`; false when the kernel keeps no
// children lists (CONFIG_PROC_CHILDREN) or `pid` is gone.
bool appendChildren(pid_t pid, std::vector<pid_t>& out) {
  const std::string tasks = fmt::format("/proc/{}/task", pid);
  DIR* dir = ::opendir(tasks.c_str());
  if (dir == nullptr) return false;
  bool listed = false;
  while (const dirent* entry = ::readdir(dir)) {
    if (entry->d_name[0] == '.') continue;
    std::ifstream in(fmt::format("{}/{}/children", tasks, entry->d_name));
    if (!in) continue;
    listed = true;
    for (long child = 0; in >> child;) {
      if (child > 0) out.push_back(static_cast<pid_t>(child));
    }
  }
  ::closedir(dir);
  return listed;
}

// descendantsRssBytes by the children lists; nullopt when the kernel keeps none.
std::optional<std::uint64_t> treeRssPages(pid_t self) {
  std::vector<pid_t> pending;
  if (!appendChildren(self, pending)) return std::nullopt;
  std::unordered_set<pid_t> seen;  // bounded: a pid's reuse cannot loop the walk
  std::uint64_t pages = 0;
  while (!pending.empty()) {
    const pid_t pid = pending.back();
    pending.pop_back();
    if (pid == self || !seen.insert(pid).second) continue;
    const auto fields = statFields(fmt::format("/proc/{}/stat", pid));
    if (!fields) continue;  // gone meanwhile
    pages += number((*fields)[21]);
    appendChildren(pid, pending);
  }
  return pages;
}

}  // namespace

std::uint64_t descendantsRssBytes(pid_t root) {
  const pid_t self = root == 0 ? ::getpid() : root;
  if (const auto pages = treeRssPages(self)) {
    return *pages * static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
  }
  struct Entry {
    pid_t ppid;
    std::uint64_t rss_pages;
  };
  std::unordered_map<pid_t, Entry> processes;
  DIR* proc = ::opendir("/proc");
  if (proc == nullptr) return 0;
  while (const dirent* entry = ::readdir(proc)) {
    char* end = nullptr;
    const long pid = std::strtol(entry->d_name, &end, 10);
    if (pid <= 0 || *end != '\0') continue;
    const auto fields = statFields(fmt::format("/proc/{}/stat", pid));
    if (!fields) continue;  // gone meanwhile
    processes[static_cast<pid_t>(pid)] = {static_cast<pid_t>(number((*fields)[1])),
                                          number((*fields)[21])};
  }
  ::closedir(proc);
  std::uint64_t pages = 0;
  for (const auto& [pid, entry] : processes) {
    // Up the parent chain to `self`, or to a process that is not ours (bounded: a chain
    // longer than the table is a cycle read across a pid's reuse).
    pid_t at = entry.ppid;
    for (std::size_t hops = 0; at > 1 && at != self && hops < processes.size(); ++hops) {
      auto parent = processes.find(at);
      if (parent == processes.end()) break;
      at = parent->second.ppid;
    }
    if (at == self && pid != self) pages += entry.rss_pages;
  }
  return pages * static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
}

std::uint64_t openFds() {
  DIR* dir = ::opendir("/proc/self/fd");
  if (dir == nullptr) return 0;
  std::uint64_t count = 0;
  while (const dirent* entry = ::readdir(dir)) {
    if (entry->d_name[0] != '.') ++count;
  }
  ::closedir(dir);
  return count > 0 ? count - 1 : 0;  // not the one reading the directory
}

std::uint64_t maxFds() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return 0;
  return static_cast<std::uint64_t>(limit.rlim_cur);
}

std::string processMetricsText() {
  const auto stats = readProcessStats();
  if (!stats) return {};
  std::string out;
  auto family = [&](const char* name, const char* type, const char* help, auto value) {
    out += fmt::format("# HELP {0} {1}\n# TYPE {0} {2}\n{0} {3}\n", name, help, type, value);
  };
  family("process_cpu_seconds_total", "counter", "Total user and system CPU time spent in seconds.",
         stats->cpu_seconds);
  family("process_resident_memory_bytes", "gauge", "Resident memory size in bytes.",
         stats->rss_bytes);
  family("process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes.",
         stats->virtual_bytes);
  family("process_start_time_seconds", "gauge",
         "Start time of the process since unix epoch in seconds.",
         bootTimeSeconds() + stats->started_after_boot_seconds);
  family("process_open_fds", "gauge", "Number of open file descriptors.", openFds());
  family("process_max_fds", "gauge", "Maximum number of open file descriptors.", maxFds());
  family("process_threads", "gauge", "Number of OS threads in the process.", stats->threads);
  return out;
}

}  // namespace dockhand::metrics
