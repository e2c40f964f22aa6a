#include "executor/leftover_tasks.h"

#include <dirent.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <climits>
#include <optional>
#include <set>
#include <string_view>

namespace dockhand::agent {

namespace {

// The task whose directory `directory` (under tasks/) lies in: tasks/task-<id>[/...].
std::optional<std::uint64_t> taskOf(std::string_view below_tasks) {
  constexpr std::string_view kPrefix = "task-";
  if (below_tasks.substr(0, kPrefix.size()) != kPrefix) return std::nullopt;
  below_tasks.remove_prefix(kPrefix.size());
  std::uint64_t id = 0;
  const char* end = below_tasks.data() + below_tasks.size();
  auto [p, e] = std::from_chars(below_tasks.data(), end, id);
  if (e != std::errc() || (p != end && *p != '/')) return std::nullopt;
  return id;
}

}  // namespace

std::vector<LeftoverTask> killLeftoverTasks(const std::filesystem::path& work_dir,
                                            const std::set<std::uint64_t>& keep) {
  std::vector<LeftoverTask> killed;
  std::error_code ec;
  const std::filesystem::path tasks = std::filesystem::weakly_canonical(work_dir / "tasks", ec);
  if (ec) return killed;
  const std::string prefix = tasks.string() + "/";
  DIR* proc = ::opendir("/proc");
  if (proc == nullptr) return killed;
  const pid_t self = ::getpid();
  std::set<pid_t> groups;
  while (const dirent* entry = ::readdir(proc)) {
    pid_t pid = 0;
    const char* name = entry->d_name;
    const char* end = name + std::char_traits<char>::length(name);
    if (auto [p, e] = std::from_chars(name, end, pid); e != std::errc() || p != end || pid <= 0) {
      continue;
    }
    if (pid == self) continue;
    char cwd[PATH_MAX];
    const std::string link = "/proc/" + std::string(name) + "/cwd";
    const ssize_t n = ::readlink(link.c_str(), cwd, sizeof cwd - 1);
    if (n <= 0) continue;  // gone, or not ours to look at
    const std::string directory(cwd, static_cast<std::size_t>(n));
    if (directory.compare(0, prefix.size(), prefix) != 0) continue;
    if (const auto task = taskOf(std::string_view(directory).substr(prefix.size()));
        task && keep.count(*task) != 0) {
      continue;
    }
    // A task's process leads a process group of its own (the runner starts it so) inside the
    // agent's session; a shell somebody opened in a task's directory leads its own session
    // and is left alone, as is anything in the agent's own group.
    const pid_t pgid = ::getpgid(pid);
    const pid_t sid = ::getsid(pid);
    if (pgid != pid || sid == pid || pgid == ::getpgrp()) continue;
    if (groups.insert(pgid).second) ::kill(-pgid, SIGKILL);
    killed.push_back({pid, pgid, directory});
  }
  ::closedir(proc);
  return killed;
}

}  // namespace dockhand::agent
