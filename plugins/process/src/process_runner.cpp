#include "process_runner.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "errno_text.h"
#include "proc_tree.h"
#include "runner_util.h"
#include "task_environment.h"
#include "task_files.h"
#include "task_spawn.h"

namespace dockhand::plugins::process {
namespace {

using nlohmann::json;

constexpr auto kDrainLimit = std::chrono::seconds(2);
constexpr auto kShutdownLimit = std::chrono::seconds(5);
// How often the running tasks' memory is sampled (a short task is measured by wait4 alone).
constexpr auto kSampleEvery = std::chrono::milliseconds(250);

// Sends `sig` to the process group `pgid`; a group that is already gone is not an error.
void signalGroup(pid_t pgid, int sig) { ::kill(-pgid, sig); }

std::string signalName(int sig) {
  const char* abbrev = ::sigabbrev_np(sig);
  return abbrev ? std::string("SIG") + abbrev : "signal " + std::to_string(sig);
}

}  // namespace

ProcessRunner::ProcessRunner(sdk::Host host, std::string_view config_json)
    : host_(host),
      config_(parseConfig(config_json)),
      identity_(resolveIdentity(config_, ::geteuid(), ::getegid())) {
  if (identity_) {
    env_user_ = identity_->name;
    env_home_ = identity_->home;
    host_.info("tasks run as user " + identity_->name + " (uid " + std::to_string(identity_->uid) +
               ", gid " + std::to_string(identity_->gid) + ")" +
               (config_.inherit_env ? "" : " with a scrubbed environment"));
  } else {
    const uid_t euid = ::geteuid();
    EnvironmentOwner owner = agentEnvironmentOwner(euid);
    env_user_ = std::move(owner.user);
    env_home_ = std::move(owner.home);
    if (euid == 0) {
      host_.warn(
          "the agent runs as root and config/user is not set: tasks run as root; set "
          "config/user (e.g. \"nobody\") to run them unprivileged");
    }
  }
  waits_for_exec_ = (identity_ && identity_->switches) || config_.limits.any();
  // Orphans of a task's processes become our children, so killing the group reaps them
  // too instead of leaving them to an init that may never wait for them.
  if (::prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) {
    host_.warn("cannot become a child subreaper (" + errnoText(errno) +
               "): processes a task leaves behind are reaped by init");
  }
  epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
  if (epoll_fd_ < 0) throw sdk::Error(DH_ERROR, "epoll_create1: " + errnoText(errno));
  wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake_fd_ < 0) {
    int error = errno;
    ::close(epoll_fd_);
    throw sdk::Error(DH_ERROR, "eventfd: " + errnoText(error));
  }
  sample_fd_ = ::timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
  for (auto [fd, id] : {std::pair{wake_fd_, kWakeId}, std::pair{sample_fd_, kSampleId}}) {
    epoll_event event{};
    event.events = EPOLLIN;
    event.data.u64 = id;
    if (fd < 0 || ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &event) != 0) {
      int error = errno;
      ::close(wake_fd_);
      if (sample_fd_ >= 0) ::close(sample_fd_);
      ::close(epoll_fd_);
      throw sdk::Error(DH_ERROR, (fd < 0 ? "timerfd_create: " : "epoll_ctl: ") + errnoText(error));
    }
  }
  reaper_ = std::thread([this] {
    ::pthread_setname_np(::pthread_self(), "dh-proc-reaper");
    reaperLoop();
  });
}

ProcessRunner::~ProcessRunner() {
  stopping_.store(true);
  wake();
  if (reaper_.joinable()) reaper_.join();

  // Kill every group that is still alive, reap it, and report it killed.
  const auto deadline = Clock::now() + kShutdownLimit;
  std::unordered_map<std::uint64_t, Task> tasks;
  {
    std::lock_guard lock(mutex_);
    tasks.swap(tasks_);
    kill_deadlines_.clear();
  }
  for (auto& [id, task] : tasks) {
    if (!task.kill_requested) {
      task.kill_requested = true;
      task.kill_reason = "task runner shut down";
    }
    signalGroup(task.pid, SIGKILL);
  }
  for (auto& [id, task] : tasks) {
    pollfd pfd{task.pidfd, POLLIN, 0};
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    ::poll(&pfd, 1, static_cast<int>(std::max<std::int64_t>(0, left.count())));
    Exited exited;
    exited.ended = Clock::now();
    rusage usage{};
    if (::wait4(task.pid, &exited.wait_status, WNOHANG, &usage) > 0) {
      exited.usage.add(usage);
    } else {
      exited.wait_status = SIGKILL;
    }
    ::close(task.pidfd);
    task.pidfd = -1;
    if (task.launch && !task.launch->done()) {
      // Killed but not gone yet, and it may still read its plan: left to it, unfreed.
      static_cast<void>(task.launch.release());
    }
    exited.task = std::move(task);
    exited.drain_deadline = deadline;
    draining_.push_back(std::move(exited));
  }
  while (!draining_.empty()) {
    for (auto it = draining_.begin(); it != draining_.end();) {
      if (drainGroup(it->task.pid, it->usage) || Clock::now() >= it->drain_deadline) {
        report(*it);
        it = draining_.erase(it);
      } else {
        ++it;
      }
    }
    if (!draining_.empty()) {
      pollfd none{-1, 0, 0};
      ::poll(&none, 0, 2);  // the killed processes are exiting; check again shortly
    }
  }
  ::close(wake_fd_);
  ::close(sample_fd_);
  ::close(epoll_fd_);
}

void ProcessRunner::launch(std::string_view task_json) {
  TaskSpec spec = parseTask(task_json);
  if (spec.task_id >= kFirstReservedId) {
    throw sdk::Error(DH_INVALID_ARGUMENT, "task_id: out of range");
  }
  {
    std::lock_guard lock(mutex_);
    if (tasks_.count(spec.task_id)) {
      throw sdk::Error(DH_INVALID_ARGUMENT,
                       "task " + std::to_string(spec.task_id) + " is already running");
    }
  }
  if (!isDirectory(spec.work_dir)) {
    throw sdk::Error(DH_INVALID_ARGUMENT, "work_dir: '" + spec.work_dir + "' is not a directory");
  }
  if (spec.cwd != spec.work_dir && !isDirectory(spec.cwd)) {
    throw sdk::Error(DH_INVALID_ARGUMENT, "payload/cwd: '" + spec.cwd + "' is not a directory");
  }

  std::vector<std::string> env = buildEnvironment(config_, env_user_, env_home_, spec.env);

  const auto started = Clock::now();
  Spawned child;
  if (!waits_for_exec_) {
    child =
        spawnTask(spec, std::move(env), config_.limits, std::nullopt, ExecWait::kNo, spawn_files_);
  } else {
    try {
      std::optional<TaskUser> user;
      if (identity_ && identity_->switches) {
        giveWorkDir(spec.work_dir);
        user = TaskUser{identity_->uid, identity_->gid};
      }
      // The steps of another user and of limits cannot be checked here: wait for the exec, so
      // that one that fails is the launch's error.
      child = spawnTask(spec, std::move(env), config_.limits, user, ExecWait::kYes, spawn_files_);
    } catch (...) {
      takeBack(spec.task_id, spec.work_dir);
      throw;
    }
  }
  const pid_t pid = child.pid;
  int pidfd = pidfdOpen(pid);
  if (pidfd < 0) {
    int error = errno;
    signalGroup(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    throw sdk::Error(DH_ERROR,
                     "cannot watch process " + std::to_string(pid) + ": " + errnoText(error));
  }

  Task task;
  task.id = spec.task_id;
  task.pid = pid;
  task.pidfd = pidfd;
  task.work_dir = std::move(spec.work_dir);
  task.started = started;
  task.launch = std::move(child.launch);
  bool wake_idle_reaper = false;
  {
    std::lock_guard lock(mutex_);
    tasks_.emplace(task.id, std::move(task));
    wake_idle_reaper = std::exchange(reaper_idle_, false);
  }
  if (wake_idle_reaper) armSampleTimer();  // the reaper samples the running tasks' memory
  // RUNNING goes out before the reaper can see the exit, so it always comes first.
  host_.taskStatus(spec.task_id, DH_TASK_RUNNING);

  epoll_event event{};
  event.events = EPOLLIN;
  event.data.u64 = spec.task_id;
  if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, pidfd, &event) != 0) {
    int error = errno;
    std::unique_ptr<ChildLaunch> launch;  // the child may read it until it is reaped, below
    {
      std::lock_guard lock(mutex_);
      if (auto it = tasks_.find(spec.task_id); it != tasks_.end()) {
        launch = std::move(it->second.launch);
        tasks_.erase(it);
      }
    }
    signalGroup(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    ::close(pidfd);
    throw sdk::Error(DH_ERROR,
                     "cannot watch process " + std::to_string(pid) + ": " + errnoText(error));
  }
}

void ProcessRunner::kill(std::uint64_t task_id, bool interrupt, std::string_view reason) {
  bool wake_reaper = false;
  {
    std::lock_guard lock(mutex_);
    auto it = tasks_.find(task_id);
    if (it == tasks_.end()) {
      throw sdk::Error(DH_NOT_FOUND, "no running task " + std::to_string(task_id));
    }
    Task& task = it->second;
    if (!task.kill_requested) {
      task.kill_requested = true;
      task.kill_reason = reason.empty() ? std::string("killed") : std::string(reason);
    }
    if (interrupt || config_.kill_grace.count() == 0) {
      signalGroup(task.pid, SIGKILL);
    } else {
      signalGroup(task.pid, SIGTERM);
      if (!task.kill_deadline) {
        task.kill_deadline = Clock::now() + config_.kill_grace;
        kill_deadlines_.emplace(*task.kill_deadline, task_id);
        wake_reaper = true;
      }
    }
  }
  if (wake_reaper) wake();
}

std::string ProcessRunner::threadDump(std::uint64_t task_id) {
  pid_t pgid = -1;
  {
    std::lock_guard lock(mutex_);
    auto it = tasks_.find(task_id);
    if (it == tasks_.end()) {
      throw sdk::Error(DH_NOT_FOUND, "no running task " + std::to_string(task_id));
    }
    pgid = it->second.pid;
  }
  json dump = {{"task_id", task_id}, {"pgid", pgid}, {"processes", describeProcessGroup(pgid)}};
  return dumpJson(dump);
}

void ProcessRunner::armSampleTimer() {
  itimerspec at{};
  at.it_value.tv_nsec = std::chrono::nanoseconds(kSampleEvery).count();
  ::timerfd_settime(sample_fd_, 0, &at, nullptr);
}

void ProcessRunner::wake() {
  std::uint64_t one = 1;
  [[maybe_unused]] auto n = ::write(wake_fd_, &one, sizeof one);
}

void ProcessRunner::reaperLoop() {
  constexpr int kMaxEvents = 64;
  epoll_event events[kMaxEvents];
  while (!stopping_.load()) {
    int n = ::epoll_wait(epoll_fd_, events, kMaxEvents, nextTimeoutMs());
    if (n < 0) {
      if (errno == EINTR) continue;
      host_.error("epoll_wait failed: " + errnoText(errno) + "; the reaper stops");
      return;
    }
    for (int i = 0; i < n && !stopping_.load(); ++i) {
      if (events[i].data.u64 == kWakeId || events[i].data.u64 == kSampleId) {
        std::uint64_t count = 0;
        [[maybe_unused]] auto r =
            ::read(events[i].data.u64 == kWakeId ? wake_fd_ : sample_fd_, &count, sizeof count);
      } else {
        onLeaderExit(events[i].data.u64);
      }
    }
    if (stopping_.load()) return;
    fireDeadlines();
    sampleMemory();
    const auto now = Clock::now();
    for (auto it = draining_.begin(); it != draining_.end();) {
      if (it->next_try > now) {
        ++it;
        continue;
      }
      bool done = drainGroup(it->task.pid, it->usage);
      if (done || now >= it->drain_deadline) {
        if (!done) {
          host_.warn("task " + std::to_string(it->task.id) + ": processes of group " +
                     std::to_string(it->task.pid) + " still exist after SIGKILL");
        }
        report(*it);
        it = draining_.erase(it);
      } else {
        auto delay = std::min<Clock::duration>(
            std::max<Clock::duration>(now - it->ended, std::chrono::milliseconds(1)),
            std::chrono::milliseconds(50));
        it->next_try = now + delay;
        ++it;
      }
    }
  }
}

void ProcessRunner::onLeaderExit(std::uint64_t task_id) {
  Exited exited;
  {
    std::lock_guard lock(mutex_);
    auto it = tasks_.find(task_id);
    if (it == tasks_.end()) return;
    exited.task = std::move(it->second);
    tasks_.erase(it);
    if (exited.task.kill_deadline) {
      auto range = kill_deadlines_.equal_range(*exited.task.kill_deadline);
      for (auto d = range.first; d != range.second; ++d) {
        if (d->second == task_id) {
          kill_deadlines_.erase(d);
          break;
        }
      }
    }
  }
  Task& task = exited.task;
  exited.ended = Clock::now();
  // The leader is a zombie, so its pid (the group id) is still ours: kill the rest first.
  signalGroup(task.pid, SIGKILL);
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, task.pidfd, nullptr);
  // A zombie still answers for what it and its reaped children read and wrote.
  if (auto io = readProcessIo(task.pid)) {
    exited.usage.read_bytes = io->read_bytes;
    exited.usage.write_bytes = io->write_bytes;
  }
  pid_t reaped;
  rusage usage{};
  do {
    reaped = ::wait4(task.pid, &exited.wait_status, 0, &usage);
  } while (reaped < 0 && errno == EINTR);
  if (reaped < 0) {
    exited.wait_status = -1;  // reaped elsewhere (SIGCHLD ignored?)
  } else {
    exited.usage.add(usage);
  }
  ::close(task.pidfd);
  task.pidfd = -1;
  if (drainGroup(task.pid, exited.usage)) {
    report(exited);
    return;
  }
  exited.drain_deadline = exited.ended + kDrainLimit;
  exited.next_try = exited.ended + std::chrono::milliseconds(1);
  draining_.push_back(std::move(exited));
}

bool ProcessRunner::drainGroup(pid_t pgid, TaskUsage& usage) {
  for (;;) {
    rusage reaped_usage{};
    pid_t pid = ::wait4(-pgid, nullptr, WNOHANG, &reaped_usage);
    if (pid > 0) {
      usage.add(reaped_usage);
      continue;
    }
    if (pid < 0 && errno == EINTR) continue;
    return pid < 0;  // ECHILD: none of our children is left in the group
  }
}

int ProcessRunner::nextTimeoutMs() {
  std::optional<Clock::time_point> next;
  for (const auto& exited : draining_) {
    if (!next || exited.next_try < *next) next = exited.next_try;
  }
  {
    std::lock_guard lock(mutex_);
    if (!kill_deadlines_.empty() && (!next || kill_deadlines_.begin()->first < *next)) {
      next = kill_deadlines_.begin()->first;
    }
    if (!tasks_.empty() && (!next || next_sample_ < *next)) next = next_sample_;
    // Nothing due: a launch wakes the reaper, so that its task gets sampled.
    reaper_idle_ = !next;
  }
  if (!next) return -1;
  auto left = std::chrono::ceil<std::chrono::milliseconds>(*next - Clock::now()).count();
  return static_cast<int>(std::clamp<std::int64_t>(left, 0, 60'000));
}

void ProcessRunner::fireDeadlines() {
  std::lock_guard lock(mutex_);
  const auto now = Clock::now();
  while (!kill_deadlines_.empty() && kill_deadlines_.begin()->first <= now) {
    auto task = tasks_.find(kill_deadlines_.begin()->second);
    if (task != tasks_.end()) {
      signalGroup(task->second.pid, SIGKILL);
      task->second.kill_deadline.reset();
    }
    kill_deadlines_.erase(kill_deadlines_.begin());
  }
}

void ProcessRunner::sampleMemory() {
  const auto now = Clock::now();
  if (now < next_sample_) return;
  next_sample_ = now + kSampleEvery;
  std::vector<std::pair<std::uint64_t, pid_t>> leaders;
  {
    std::lock_guard lock(mutex_);
    leaders.reserve(tasks_.size());
    for (const auto& [id, task] : tasks_) {
      // Before its exec a child still shares the agent's memory: its peak is the agent's.
      if (task.launch && !task.launch->done()) continue;
      leaders.emplace_back(id, task.pid);
    }
  }
  for (auto& [id, pid] : leaders) {
    const std::uint64_t peak = readPeakRssKib(pid);  // outside the lock: /proc reads
    if (peak == 0) continue;
    std::lock_guard lock(mutex_);
    if (auto it = tasks_.find(id); it != tasks_.end() && it->second.pid == pid) {
      it->second.sampled_peak_kib = std::max(it->second.sampled_peak_kib, peak);
    }
  }
}

void ProcessRunner::giveWorkDir(const std::string& work_dir) {
  // The task user owns its work directory (outputs, inputs) while it runs; the agent takes it
  // back when the task ends (report()).
  std::string failure = chownTree(work_dir, identity_->uid, identity_->gid, std::nullopt);
  if (!failure.empty()) {
    throw sdk::Error(DH_ERROR, "cannot give the work directory to uid " +
                                   std::to_string(identity_->uid) + ": " + failure);
  }
}

void ProcessRunner::takeBack(std::uint64_t task_id, const std::string& work_dir) {
  if (!identity_ || !identity_->switches) return;
  std::string failure = chownTree(work_dir, ::geteuid(), ::getegid(), identity_->uid);
  if (!failure.empty()) {
    host_.warn("task " + std::to_string(task_id) +
               ": cannot take its work directory back from uid " + std::to_string(identity_->uid) +
               ": " + failure);
  }
}

void ProcessRunner::report(const Exited& exited) {
  const Task& task = exited.task;
  // The task is over: its directory (and the outputs that become blocks) goes back to the
  // agent, out of reach of the next tasks of the same user.
  takeBack(task.id, task.work_dir);
  const int status = exited.wait_status;
  json detail;
  std::int32_t state;
  std::optional<std::size_t> result_bytes;  // FINISHED: the stdout kept
  std::optional<std::string> not_started;   // a step before exec failed (task_spawn.h)
  if (task.launch) not_started = task.launch->failure();
  if (task.kill_requested) {
    state = DH_TASK_KILLED;
    detail = {{"reason", task.kill_reason}};
  } else if (not_started) {
    state = DH_TASK_FAILED;
    detail = {{"reason", std::move(*not_started)}};
  } else if (status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0) {
    state = DH_TASK_FINISHED;
    auto [out, size] = readPart(task.work_dir + "/stdout", config_.result_limit_bytes, false);
    result_bytes = out.size();
    auto duration =
        std::chrono::duration_cast<std::chrono::milliseconds>(exited.ended - task.started);
    detail = {{"result",
               {{"exit_code", 0},
                {"stdout", std::move(out)},
                {"stdout_truncated", size > config_.result_limit_bytes},
                {"duration_ms", duration.count()}}}};
  } else {
    state = DH_TASK_FAILED;
    if (status == -1) {
      detail = {{"reason", "exit status unavailable (the process was reaped elsewhere)"}};
    } else if (WIFEXITED(status)) {
      detail = {{"reason", "exited with code " + std::to_string(WEXITSTATUS(status))},
                {"exit_code", WEXITSTATUS(status)}};
    } else {
      const int sig = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
      detail = {
          {"reason", "killed by signal " + std::to_string(sig) + " (" + signalName(sig) + ")"},
          {"signal", sig}};
    }
    detail["stderr_tail"] =
        readPart(task.work_dir + "/stderr", config_.stderr_tail_bytes, true).first;
  }
  json metrics = exited.usage.toMetrics(
      task.adopted ? std::numeric_limits<std::uint64_t>::max() : ownPeakRssKib(),
      task.sampled_peak_kib);
  if (result_bytes) metrics["result_bytes"] = *result_bytes;
  if (!metrics.empty()) detail["metrics"] = std::move(metrics);
  host_.taskStatus(task.id, state, dumpJson(detail));
}

}  // namespace dockhand::plugins::process
