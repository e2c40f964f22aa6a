#include "process_runner.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <string_view>
#include <system_error>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "proc_tree.h"

extern char** environ;

namespace dockhand::plugins::process {
namespace {

using nlohmann::json;

constexpr std::uint64_t kWakeId = std::numeric_limits<std::uint64_t>::max();
constexpr auto kDrainLimit = std::chrono::seconds(2);
constexpr auto kShutdownLimit = std::chrono::seconds(5);

std::string errnoText(int error) { return std::generic_category().message(error); }

std::string dumpJson(const json& value) {
  // Task output is arbitrary bytes: replace what is not UTF-8 instead of throwing.
  return value.dump(-1, ' ', false, json::error_handler_t::replace);
}

int pidfdOpen(pid_t pid) { return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)); }

// Sends `sig` to the process group `pgid`; a group that is already gone is not an error.
void signalGroup(pid_t pgid, int sig) { ::kill(-pgid, sig); }

std::string signalName(int sig) {
  const char* abbrev = ::sigabbrev_np(sig);
  return abbrev ? std::string("SIG") + abbrev : "signal " + std::to_string(sig);
}

// Reads at most `limit` bytes of `path` from `offset` (or from the end when tail is set).
// Returns the bytes and the file's total size.
std::pair<std::string, std::uint64_t> readPart(const std::string& path, std::size_t limit,
                                               bool tail) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {{}, 0};
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    return {{}, 0};
  }
  const auto size = static_cast<std::uint64_t>(st.st_size);
  const std::size_t want = static_cast<std::size_t>(std::min<std::uint64_t>(size, limit));
  off_t offset = tail ? static_cast<off_t>(size - want) : 0;
  std::string data(want, '\0');
  std::size_t got = 0;
  while (got < want) {
    ssize_t n = ::pread(fd, data.data() + got, want - got, offset + static_cast<off_t>(got));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<std::size_t>(n);
  }
  data.resize(got);
  ::close(fd);
  return {std::move(data), size};
}

bool isDirectory(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// The child's environment: the agent's, then the task's and the payload's (later wins).
std::vector<std::string> buildEnvironment(
    const std::vector<std::pair<std::string, std::string>>& overrides) {
  std::unordered_map<std::string_view, std::string_view> wanted;
  wanted.reserve(overrides.size());
  for (const auto& [key, value] : overrides) wanted[key] = value;
  std::vector<std::string> env;
  for (char** entry = environ; entry && *entry; ++entry) {
    std::string_view item(*entry);
    auto eq = item.find('=');
    if (eq != std::string_view::npos && wanted.count(item.substr(0, eq))) continue;
    env.emplace_back(item);
  }
  for (const auto& [key, value] : wanted) {
    std::string item;
    item.reserve(key.size() + value.size() + 1);
    item.append(key).append("=").append(value);
    env.push_back(std::move(item));
  }
  return env;
}

// posix_spawn's attribute and file-action objects, destroyed on every path.
class SpawnSetup {
 public:
  SpawnSetup() {
    ::posix_spawnattr_init(&attr_);
    ::posix_spawn_file_actions_init(&actions_);
  }
  ~SpawnSetup() {
    ::posix_spawn_file_actions_destroy(&actions_);
    ::posix_spawnattr_destroy(&attr_);
  }
  SpawnSetup(const SpawnSetup&) = delete;
  SpawnSetup& operator=(const SpawnSetup&) = delete;
  posix_spawnattr_t* attr() { return &attr_; }
  posix_spawn_file_actions_t* actions() { return &actions_; }

 private:
  posix_spawnattr_t attr_;
  posix_spawn_file_actions_t actions_;
};

void check(int rc, const char* what) {
  if (rc != 0) throw sdk::Error(DH_ERROR, std::string(what) + ": " + errnoText(rc));
}

}  // namespace

ProcessRunner::ProcessRunner(sdk::Host host, std::string_view config_json)
    : host_(host), config_(parseConfig(config_json)) {
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
  epoll_event event{};
  event.events = EPOLLIN;
  event.data.u64 = kWakeId;
  if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &event) != 0) {
    int error = errno;
    ::close(wake_fd_);
    ::close(epoll_fd_);
    throw sdk::Error(DH_ERROR, "epoll_ctl: " + errnoText(error));
  }
  reaper_ = std::thread([this] { reaperLoop(); });
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
    if (::waitpid(task.pid, &exited.wait_status, WNOHANG) <= 0) exited.wait_status = SIGKILL;
    ::close(task.pidfd);
    task.pidfd = -1;
    exited.task = std::move(task);
    exited.drain_deadline = deadline;
    draining_.push_back(std::move(exited));
  }
  while (!draining_.empty()) {
    for (auto it = draining_.begin(); it != draining_.end();) {
      if (drainGroup(it->task.pid) || Clock::now() >= it->drain_deadline) {
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
  ::close(epoll_fd_);
}

void ProcessRunner::launch(std::string_view task_json) {
  TaskSpec spec = parseTask(task_json);
  if (spec.task_id == kWakeId) throw sdk::Error(DH_INVALID_ARGUMENT, "task_id: out of range");
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

  std::vector<std::string> env = buildEnvironment(spec.env);
  std::vector<char*> envp;
  envp.reserve(env.size() + 1);
  for (auto& item : env) envp.push_back(item.data());
  envp.push_back(nullptr);
  std::vector<char*> argv;
  argv.reserve(spec.argv.size() + 1);
  for (auto& arg : spec.argv) argv.push_back(arg.data());
  argv.push_back(nullptr);

  SpawnSetup setup;
  sigset_t all;
  sigset_t none;
  ::sigfillset(&all);
  ::sigemptyset(&none);
  check(::posix_spawnattr_setflags(
            setup.attr(), POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK),
        "posix_spawnattr_setflags");
  check(::posix_spawnattr_setpgroup(setup.attr(), 0), "posix_spawnattr_setpgroup");
  check(::posix_spawnattr_setsigdefault(setup.attr(), &all), "posix_spawnattr_setsigdefault");
  check(::posix_spawnattr_setsigmask(setup.attr(), &none), "posix_spawnattr_setsigmask");
  const std::string out_path = spec.work_dir + "/stdout";
  const std::string err_path = spec.work_dir + "/stderr";
  check(::posix_spawn_file_actions_addopen(setup.actions(), 0, "/dev/null", O_RDONLY, 0),
        "posix_spawn_file_actions_addopen");
  check(::posix_spawn_file_actions_addopen(setup.actions(), 1, out_path.c_str(),
                                           O_WRONLY | O_CREAT | O_TRUNC, 0644),
        "posix_spawn_file_actions_addopen");
  check(::posix_spawn_file_actions_addopen(setup.actions(), 2, err_path.c_str(),
                                           O_WRONLY | O_CREAT | O_TRUNC, 0644),
        "posix_spawn_file_actions_addopen");
  check(::posix_spawn_file_actions_addchdir_np(setup.actions(), spec.cwd.c_str()),
        "posix_spawn_file_actions_addchdir_np");

  pid_t pid = -1;
  const auto started = Clock::now();
  int rc =
      spec.search_path
          ? ::posix_spawnp(&pid, argv[0], setup.actions(), setup.attr(), argv.data(), envp.data())
          : ::posix_spawn(&pid, argv[0], setup.actions(), setup.attr(), argv.data(), envp.data());
  if (rc != 0) {
    throw sdk::Error(DH_ERROR, "cannot start '" + spec.argv.front() + "': " + errnoText(rc));
  }

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
  {
    std::lock_guard lock(mutex_);
    tasks_.emplace(task.id, std::move(task));
  }
  // RUNNING goes out before the reaper can see the exit, so it always comes first.
  host_.taskStatus(spec.task_id, DH_TASK_RUNNING);

  epoll_event event{};
  event.events = EPOLLIN;
  event.data.u64 = spec.task_id;
  if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, pidfd, &event) != 0) {
    int error = errno;
    {
      std::lock_guard lock(mutex_);
      tasks_.erase(spec.task_id);
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
      if (events[i].data.u64 == kWakeId) {
        std::uint64_t count = 0;
        [[maybe_unused]] auto r = ::read(wake_fd_, &count, sizeof count);
      } else {
        onLeaderExit(events[i].data.u64);
      }
    }
    if (stopping_.load()) return;
    fireDeadlines();
    const auto now = Clock::now();
    for (auto it = draining_.begin(); it != draining_.end();) {
      if (it->next_try > now) {
        ++it;
        continue;
      }
      bool done = drainGroup(it->task.pid);
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
  pid_t reaped;
  do {
    reaped = ::waitpid(task.pid, &exited.wait_status, 0);
  } while (reaped < 0 && errno == EINTR);
  if (reaped < 0) exited.wait_status = -1;  // reaped elsewhere (SIGCHLD ignored?)
  ::close(task.pidfd);
  task.pidfd = -1;
  if (drainGroup(task.pid)) {
    report(exited);
    return;
  }
  exited.drain_deadline = exited.ended + kDrainLimit;
  exited.next_try = exited.ended + std::chrono::milliseconds(1);
  draining_.push_back(std::move(exited));
}

bool ProcessRunner::drainGroup(pid_t pgid) {
  for (;;) {
    pid_t pid = ::waitpid(-pgid, nullptr, WNOHANG);
    if (pid > 0) continue;
    if (pid < 0 && errno == EINTR) continue;
    return pid < 0;  // ECHILD: none of our children is left in the group
  }
}

int ProcessRunner::nextTimeoutMs() {
  std::optional<Clock::time_point> next;
  {
    std::lock_guard lock(mutex_);
    if (!kill_deadlines_.empty()) next = kill_deadlines_.begin()->first;
  }
  for (const auto& exited : draining_) {
    if (!next || exited.next_try < *next) next = exited.next_try;
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

void ProcessRunner::report(const Exited& exited) {
  const Task& task = exited.task;
  const int status = exited.wait_status;
  json detail;
  std::int32_t state;
  if (task.kill_requested) {
    state = DH_TASK_KILLED;
    detail = {{"reason", task.kill_reason}};
  } else if (status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0) {
    state = DH_TASK_FINISHED;
    auto [out, size] = readPart(task.work_dir + "/stdout", config_.result_limit_bytes, false);
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
  host_.taskStatus(task.id, state, dumpJson(detail));
}

}  // namespace dockhand::plugins::process
