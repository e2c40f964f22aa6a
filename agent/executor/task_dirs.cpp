// PluginExecutor's task directories (plugin_executor.h): each task's <work_dir>/tasks/task-<id>/
// made (or a spare one renamed), ended ones kept up to keep_task_dirs and then cleared for reuse
// or removed on an I/O thread, and the stdout/stderr in them opened for the block server.
// Apart from plugin_executor.cpp, which runs the tasks, because this is file work of its own.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <optional>
#include <system_error>

#include "dockhand/base/log_format.h"
#include "dockhand/base/logging.h"
#include "executor/plugin_executor.h"
#include "executor/task_files.h"

namespace dockhand::agent {
namespace {

constexpr std::size_t kMaxRememberedEnded = 100000;
// Cleared directories kept for new tasks: enough for the tasks that start while as many end.
constexpr std::size_t kMaxSpareDirs = 64;

std::string cannotCreate(const std::filesystem::path& path, const std::error_code& ec) {
  return "cannot create task directory '" + path.string() + "': " + ec.message();
}

}  // namespace

std::filesystem::path PluginExecutor::taskDir(std::uint64_t task_id) const {
  return work_dir_ / "tasks" / ("task-" + std::to_string(task_id));
}

Result<void> PluginExecutor::makeTasksDir() {
  if (tasks_dir_ready_) return {};
  namespace fs = std::filesystem;
  const fs::path tasks = work_dir_ / "tasks";
  std::error_code ec;
  // tasks/ can be passed through but not listed (0711): a task that runs as another user
  // reaches its own directory, and cannot find the others'.
  fs::create_directories(tasks, ec);
  if (!ec) {
    fs::permissions(tasks, fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec,
                    ec);
  }
  if (ec) return Error(cannotCreate(tasks, ec));
  tasks_dir_ready_ = true;
  return {};
}

Result<void> PluginExecutor::makeTaskDir(Live& live, const std::filesystem::path& task_dir) {
  namespace fs = std::filesystem;
  if (takeSpareDir(live, task_dir)) return {};
  // Each task's directory is 0700: its runner may give it to the task's user.
  std::error_code ec;
  fs::create_directory(task_dir, ec);
  if (!ec) fs::permissions(task_dir, fs::perms::owner_all, ec);
  if (ec) return Error(cannotCreate(task_dir, ec));
  for (const char* sub : {"output", "input"}) {
    fs::create_directory(task_dir / sub, ec);
    if (ec) return Error(cannotCreate(task_dir / sub, ec));
  }
  return {};
}

bool PluginExecutor::takeSpareDir(Live& live, const std::filesystem::path& task_dir) {
  std::filesystem::path from;
  std::optional<std::uint64_t> untouched;  // the task whose directory it was
  {
    std::lock_guard lock(live.mutex);
    // An ended task's untouched directory first: one rename within tasks/, and no I/O thread
    // had to clear it.
    if (!live.untouched.empty()) {
      untouched = live.untouched.back().first;
      from = std::move(live.untouched.back().second);
      live.untouched.pop_back();
    } else if (!live.spares.empty()) {
      from = std::move(live.spares.back());
      live.spares.pop_back();
    } else {
      return false;
    }
  }
  // One rename, where a new directory costs three inodes (and a removed one frees three).
  if (::renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, task_dir.c_str(), RENAME_NOREPLACE) == 0) {
    return true;
  }
  const int error = errno;
  if (error == EEXIST) {
    // The task's directory is there already (left by an earlier agent): used as it is.
    std::lock_guard lock(live.mutex);
    if (untouched) {
      live.untouched.emplace_back(*untouched, std::move(from));
    } else {
      live.spares.push_back(std::move(from));
    }
  } else {
    logger("executor")
        ->warn("cannot reuse the directory {}: {}", from.string(), std::strerror(error));
  }
  return false;
}

void PluginExecutor::reuseOrRemove(Live& live, const std::filesystem::path& spare_root,
                                   const std::filesystem::path& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  bool room = false;
  {
    std::lock_guard lock(live.mutex);
    room = live.spares.size() < kMaxSpareDirs;
  }
  if (room && !live.spare_dir_usable) {
    // Spares an earlier agent left are not known to this one.
    fs::remove_all(spare_root, ec);
    fs::create_directory(spare_root, ec);
    if (!ec) fs::permissions(spare_root, fs::perms::owner_all, ec);
    if (ec) {
      logger("executor")
          ->warn("cannot make {}: {}; ended tasks' directories are removed instead",
                 spare_root.string(), ec.message());
    }
    live.spare_dir_usable = !ec;
  }
  if (room && live.spare_dir_usable.value_or(false)) {
    if (auto cleared = clearForReuse(dir); !cleared) {
      logger("executor")
          ->debug("an ended task's directory is removed, not reused: {}", cleared.error().message);
    } else {
      fs::path spare = spare_root / std::to_string(live.spares_made++);
      // Renamed under the lock: a launch that follows a directory parked on disk (another
      // thread saw it there) is offered it, rather than a new one made beside it.
      std::lock_guard lock(live.mutex);
      if (::renameat2(AT_FDCWD, dir.c_str(), AT_FDCWD, spare.c_str(), RENAME_NOREPLACE) == 0) {
        live.spares.push_back(std::move(spare));
        return;
      }
    }
  }
  fs::remove_all(dir, ec);
  if (ec) {
    logger("executor")
        ->warn("cannot remove the directory of an ended task {}: {}", dir.string(), ec.message());
  }
}

void PluginExecutor::rememberNoDir(std::uint64_t task_id, NoDir why) {
  live_->no_dir[task_id] = why;
  live_->no_dir_order.push_back(task_id);
  if (live_->no_dir_order.size() > kMaxRememberedEnded) {
    live_->no_dir.erase(live_->no_dir_order.front());
    live_->no_dir_order.pop_front();
  }
}

std::optional<PluginExecutor::NoDir> PluginExecutor::noDirOf(std::uint64_t task_id) const {
  auto found = live_->no_dir.find(task_id);
  if (found == live_->no_dir.end()) return std::nullopt;
  return found->second;
}

bool PluginExecutor::offerUntouched(std::uint64_t task_id, LeftInDir left) {
  if (left != LeftInDir::kNothing) return false;
  std::lock_guard lock(live_->mutex);
  if (live_->untouched.size() >= kMaxSpareDirs) return false;
  // Marked before it can be taken, so that its logs answer empty from here on (openTaskLog).
  rememberNoDir(task_id, NoDir::kWroteNothing);
  live_->untouched.emplace_back(task_id, taskDir(task_id));
  return true;
}

void PluginExecutor::retireTaskDir(std::uint64_t task_id) {
  const LeftInDir left = lookAtEndedDir(taskDir(task_id));
  if (!offerUntouched(task_id, left)) keepEndedDir(task_id, left);
}

void PluginExecutor::keepEndedDir(std::uint64_t task_id, LeftInDir left) {
  {
    std::lock_guard lock(live_->mutex);
    // A runner that makes directories made none for a task that wrote nothing.
    if (left == LeftInDir::kNoDirectory) {
      rememberNoDir(task_id, NoDir::kNeverHad);
      return;
    }
    auto& ended = live_->ended_dirs;
    ended.push_back(task_id);
    while (ended.size() > keep_task_dirs_) {
      live_->doomed.push_back(taskDir(ended.front()));
      rememberNoDir(ended.front(), NoDir::kReclaimed);
      ended.pop_front();
    }
    // One removal job at a time takes whatever is doomed by then: under load, one I/O
    // thread wake-up removes many directories.
    if (live_->doomed.empty() || live_->removing) return;
    live_->removing = true;
  }
  io_->submit([live = live_, spare_root = work_dir_ / "tasks" / "spare"] {
    for (;;) {
      std::vector<std::filesystem::path> doomed;
      {
        std::lock_guard lock(live->mutex);
        doomed.swap(live->doomed);
        if (doomed.empty()) {
          live->removing = false;
          return;
        }
      }
      for (const auto& dir : doomed) reuseOrRemove(*live, spare_root, dir);
    }
  });
}

void PluginExecutor::keepTaskDirs(std::size_t count) {
  std::lock_guard lock(live_->mutex);
  keep_task_dirs_ = count;
}

LogFile PluginExecutor::openTaskLog(std::uint64_t task_id, const std::string& stream) const {
  const std::string task = "task " + std::to_string(task_id);
  if (stream != "stdout" && stream != "stderr") {
    return LogFile::refused(404, "no such stream '" + stream + "' (a task has stdout and stderr)");
  }
  bool known = false;
  {
    std::lock_guard lock(live_->mutex);
    const std::optional<NoDir> no_dir = noDirOf(task_id);
    known = live_->tasks.count(task_id) > 0 || live_->ingesting.count(task_id) > 0 || no_dir ||
            std::find(live_->ended_dirs.begin(), live_->ended_dirs.end(), task_id) !=
                live_->ended_dirs.end();
    if (no_dir == NoDir::kWroteNothing) return LogFile::empty();  // the task wrote nothing
    if (no_dir == NoDir::kReclaimed) {
      return LogFile::refused(
          404, task + "'s directory was reclaimed: this agent keeps the directories of its " +
                   std::to_string(keep_task_dirs_) + " most recently ended tasks (keep_task_dirs)");
    }
  }
  // Whether the task's directory went to another task meanwhile (it wrote nothing): then its
  // file may hold the other task's output.
  auto taken = [&] {
    std::lock_guard lock(live_->mutex);
    return noDirOf(task_id) == NoDir::kWroteNothing;
  };
  const std::filesystem::path dir = taskDir(task_id);
  const std::filesystem::path file = dir / stream;
  // O_NOFOLLOW: a task cannot make its stdout a link to a file only the agent may read.
  // O_NONBLOCK: nor a FIFO that blocks the open (the server refuses what is not regular).
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd >= 0) {
    // Its size now is the task's own (the directory cannot have gone to another task before
    // the check that follows says so): no more than that is served.
    struct stat st {};
    const bool measured = ::fstat(fd, &st) == 0;
    if (taken()) {
      ::close(fd);
      return LogFile::empty();
    }
    if (!measured) {
      ::close(fd);
      return LogFile::refused(404, task + "'s " + stream + " cannot be read");
    }
    return LogFile::open(fd, static_cast<std::uint64_t>(st.st_size));
  }
  const int error = errno;
  if (error == ENOENT) {
    if (taken()) return LogFile::empty();
    std::error_code ec;
    if (known || std::filesystem::is_directory(dir, ec)) {
      return LogFile::refused(
          404, task + " has no " + stream +
                   " file (its runner does not write one, or it has not started yet)");
    }
    return LogFile::refused(404, "unknown task " + std::to_string(task_id) +
                                     ": it has not run on this executor since the agent started");
  }
  if (error == ELOOP) {
    return LogFile::refused(404, task + "'s " + stream + " is not a regular file");
  }
  return LogFile::refused(404,
                          task + "'s " + stream + " cannot be opened: " + std::strerror(error));
}

}  // namespace dockhand::agent
