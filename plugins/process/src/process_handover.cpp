// The process runner's side of a restart in place (plugin.h, detach and adopt): a running
// task's handle (its leader's pid and start time, when it started, its directory), and taking
// the task back from that handle in the next program, as a child of the same process.
#include <sys/epoll.h>
#include <unistd.h>

#include <chrono>
#include <limits>
#include <string>
#include <string_view>
#include <utility>

#include <nlohmann/json.hpp>

#include "errno_text.h"
#include "proc_tree.h"
#include "process_runner.h"
#include "runner_util.h"

namespace dockhand::plugins::process {

using nlohmann::json;

std::string ProcessRunner::detach(std::uint64_t task_id) {
  Task task;
  {
    std::lock_guard lock(mutex_);
    auto it = tasks_.find(task_id);
    if (it == tasks_.end()) {
      throw sdk::Error(DH_NOT_FOUND, "no running task " + std::to_string(task_id));
    }
    if (it->second.kill_requested) {
      throw sdk::Error(DH_UNSUPPORTED, "task " + std::to_string(task_id) + " is being killed");
    }
    task = std::move(it->second);
    tasks_.erase(it);
  }
  // Out of the reaper's sight: an exit it saw already finds no task and is left alone.
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, task.pidfd, nullptr);
  ::close(task.pidfd);
  if (task.launch && !task.launch->waitDone(kExecWaitOnDetach)) {
    // Still not exec'd, and it reads its plan until then: left to it, unfreed. (The program is
    // about to be replaced; the child keeps the memory it shares.)
    static_cast<void>(task.launch.release());
  }
  const auto identity = readProcessIdentity(task.pid);
  const json handle = {{"pid", task.pid},
                       {"start_ticks", identity ? identity->start_ticks : 0},
                       {"started_ns", std::chrono::duration_cast<std::chrono::nanoseconds>(
                                          task.started.time_since_epoch())
                                          .count()},
                       {"work_dir", task.work_dir}};
  return dumpJson(handle);
}

void ProcessRunner::adopt(std::uint64_t task_id, std::string_view handle_json) {
  const json handle = json::parse(handle_json, nullptr, /*allow_exceptions=*/false);
  if (!handle.is_object() || !handle.contains("pid") || !handle["pid"].is_number_integer() ||
      !handle.contains("start_ticks") || !handle["start_ticks"].is_number_unsigned() ||
      !handle.contains("started_ns") || !handle["started_ns"].is_number_integer() ||
      !handle.contains("work_dir") || !handle["work_dir"].is_string()) {
    throw sdk::Error(DH_INVALID_ARGUMENT,
                     "not a process runner's handle (pid, start_ticks, started_ns, work_dir)");
  }
  if (task_id >= kFirstReservedId) throw sdk::Error(DH_INVALID_ARGUMENT, "task_id: out of range");
  const auto pid = handle["pid"].get<pid_t>();
  const std::string what = "process " + std::to_string(pid);
  const auto identity = pid > 0 ? readProcessIdentity(pid) : std::nullopt;
  if (!identity) throw sdk::Error(DH_NOT_FOUND, what + " is gone");
  if (identity->start_ticks != handle["start_ticks"].get<unsigned long long>()) {
    throw sdk::Error(DH_NOT_FOUND, what + " is another process now (its start time differs)");
  }
  // Only the parent learns how a process ended; after a restart in place that is still us.
  if (identity->ppid != ::getpid()) {
    throw sdk::Error(DH_UNSUPPORTED, what + " is not a child of this agent (parent " +
                                         std::to_string(identity->ppid) +
                                         "): its exit status could not be known");
  }
  const int pidfd = pidfdOpen(pid);
  if (pidfd < 0) throw sdk::Error(DH_ERROR, "cannot watch " + what + ": " + errnoText(errno));
  Task task;
  task.id = task_id;
  task.pid = pid;
  task.pidfd = pidfd;
  task.work_dir = handle["work_dir"].get<std::string>();
  task.started = Clock::time_point(std::chrono::duration_cast<Clock::duration>(
      std::chrono::nanoseconds(handle["started_ns"].get<std::int64_t>())));
  // Spawned by the program before this one: its wait4 peak may be that program's (see
  // task_usage.h), which this one cannot tell; only its samples count.
  task.adopted = true;
  bool wake_idle_reaper = false;
  {
    std::lock_guard lock(mutex_);
    if (!tasks_.emplace(task_id, std::move(task)).second) {
      ::close(pidfd);
      throw sdk::Error(DH_INVALID_ARGUMENT,
                       "task " + std::to_string(task_id) + " is already running");
    }
    wake_idle_reaper = std::exchange(reaper_idle_, false);
  }
  if (wake_idle_reaper) armSampleTimer();
  epoll_event event{};
  event.events = EPOLLIN;
  event.data.u64 = task_id;
  if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, pidfd, &event) != 0) {
    const int error = errno;
    {
      std::lock_guard lock(mutex_);
      tasks_.erase(task_id);
    }
    ::close(pidfd);
    throw sdk::Error(DH_ERROR, "cannot watch " + what + ": " + errnoText(error));
  }
}

}  // namespace dockhand::plugins::process
