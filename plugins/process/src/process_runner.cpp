#include "process_runner.h"

#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/close_range.h>
#include <poll.h>
#include <pthread.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/resource.h>
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

constexpr const char* kDefaultPath = "/usr/local/bin:/usr/bin:/bin";

// The child's environment (a later value wins): either the agent's own, or (inherit_env
// false) a minimal PATH/HOME/USER/LOGNAME/LANG plus the agent variables named in env_allow;
// then the task's and the payload's. The agent's private variables are never passed.
std::vector<std::string> buildEnvironment(
    const ProcessConfig& config, const std::string& user, const std::string& home,
    const std::vector<std::pair<std::string, std::string>>& overrides) {
  std::unordered_map<std::string, std::string> vars;
  if (config.inherit_env) {
    for (char** entry = environ; entry && *entry; ++entry) {
      std::string_view item(*entry);
      auto eq = item.find('=');
      if (eq == std::string_view::npos || isAgentPrivateVariable(item.substr(0, eq))) continue;
      vars.insert_or_assign(std::string(item.substr(0, eq)), std::string(item.substr(eq + 1)));
    }
  } else {
    const char* lang = ::getenv("LANG");
    vars = {{"PATH", kDefaultPath},
            {"HOME", home},
            {"USER", user},
            {"LOGNAME", user},
            {"LANG", lang && *lang ? lang : "C.UTF-8"}};
    for (const auto& name : config.env_allow) {
      if (const char* value = ::getenv(name.c_str())) vars.insert_or_assign(name, value);
    }
  }
  for (const auto& [key, value] : overrides) vars.insert_or_assign(key, value);
  std::vector<std::string> env;
  env.reserve(vars.size());
  for (const auto& [key, value] : vars) {
    std::string item;
    item.reserve(key.size() + value.size() + 1);
    item.append(key).append("=").append(value);
    env.push_back(std::move(item));
  }
  return env;
}

// The program a bare command names, looked up in the agent's PATH like execvp does.
// Throws the launch error when there is none.
std::string searchPath(const std::string& name) {
  const char* path_var = ::getenv("PATH");
  std::string_view path = path_var && *path_var ? path_var : kDefaultPath;
  int error = ENOENT;
  while (true) {
    auto colon = path.find(':');
    std::string_view dir = path.substr(0, colon);
    std::string candidate = dir.empty() ? name : std::string(dir) + "/" + name;
    struct stat st {};
    if (::stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
      if (st.st_mode & 0111) return candidate;
      error = EACCES;
    }
    if (colon == std::string_view::npos) break;
    path.remove_prefix(colon + 1);
  }
  throw sdk::Error(DH_ERROR, "cannot start '" + name + "': " + errnoText(error));
}

// Gives `dir` and everything under it to uid:gid without following symbolic links. With
// `only_from`, only what that uid owns changes hands (taking a task's files back must not
// touch files it does not own, e.g. hard links to other files). Returns the first failure.
std::string chownTree(const std::string& dir, uid_t uid, gid_t gid,
                      std::optional<uid_t> only_from) {
  std::string failure;
  auto note = [&](const std::string& what, int error) {
    if (failure.empty()) failure = what + ": " + errnoText(error);
  };
  // Recursion over directory descriptors: names are resolved relative to an open directory
  // and never through a symbolic link, so a task cannot redirect the walk elsewhere.
  auto walk = [&](auto& self, int fd, const std::string& shown, int depth) -> void {
    struct stat st {};
    if (::fstat(fd, &st) != 0) return note(shown, errno);
    if ((!only_from || st.st_uid == *only_from) && ::fchown(fd, uid, gid) != 0) {
      note(shown, errno);
    }
    if (depth >= 128) return note(shown, ELOOP);
    int copy = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (copy < 0) return note(shown, errno);
    DIR* listing = ::fdopendir(copy);
    if (!listing) {
      ::close(copy);
      return note(shown, errno);
    }
    while (dirent* entry = ::readdir(listing)) {
      std::string_view name = entry->d_name;
      if (name == "." || name == "..") continue;
      const std::string path = shown + "/" + std::string(name);
      struct stat child {};
      if (::fstatat(fd, entry->d_name, &child, AT_SYMLINK_NOFOLLOW) != 0) {
        note(path, errno);
        continue;
      }
      if (S_ISDIR(child.st_mode)) {
        int sub = ::openat(fd, entry->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (sub < 0) {
          note(path, errno);
          continue;
        }
        self(self, sub, path, depth + 1);
        ::close(sub);
      } else if ((!only_from || child.st_uid == *only_from) &&
                 ::fchownat(fd, entry->d_name, uid, gid, AT_SYMLINK_NOFOLLOW) != 0) {
        note(path, errno);
      }
    }
    ::closedir(listing);
  };
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return dir + ": " + errnoText(errno);
  walk(walk, fd, dir, 0);
  ::close(fd);
  return failure;
}

// What the child does between clone and exec, all prepared by the parent: it shares the
// agent's memory, so it only makes system calls (async-signal-safe ones) and writes nothing
// but its own stack.
struct ChildPlan {
  int stdin_fd = -1;
  int stdout_fd = -1;
  int stderr_fd = -1;
  int report_fd = -1;
  const char* program = nullptr;
  char* const* argv = nullptr;
  char* const* envp = nullptr;
  const char* cwd = nullptr;
  struct Limit {
    __rlimit_resource_t resource{};
    rlim_t value = 0;
  };
  Limit limits[4];
  int limit_count = 0;
  bool switch_user = false;
  uid_t uid = 0;
  gid_t gid = 0;
};

// What the child writes to the report pipe when a step fails; nothing when exec succeeds.
enum class ChildStep : int {
  kSetpgid = 1,
  kStdio,
  kSetrlimit,
  kSetgroups,
  kSetgid,
  kSetuid,
  kChdir,
  kExec
};
struct ChildFailure {
  ChildStep step;
  int index;  // which limit, for kSetrlimit
  int error;
};

// The child runs on a small stack of its own, sharing the agent's memory (and the agent
// thread's thread-local storage) until exec. So it calls no libc function a sanitizer
// intercepts: an interceptor would update the runtime's state of the parent — ThreadSanitizer
// took the child's sigaction() for the agent's own and its pid for a fork, and then reported
// races and "threads after fork" in the agent. Every step is a raw system call, and the child
// code is not instrumented either (AddressSanitizer would take the foreign stack for a stack
// switch before each call that does not return).
#define DOCKHAND_CHILD_CODE __attribute__((no_sanitize("address", "undefined", "thread")))

// The kernel's struct sigaction (not glibc's): all zero is SIG_DFL, no flags, nothing masked.
struct KernelSigaction {
  unsigned long handler;
  unsigned long flags;
  unsigned long restorer;
  unsigned long mask;
};
constexpr long kKernelSigsetBytes = sizeof(unsigned long);

// The system call's result: -errno on failure, as the kernel returns it. (glibc's syscall()
// sets errno on failure, which here is the agent thread's: it waits until exec, and reads
// errno after clone only when clone itself failed.)
DOCKHAND_CHILD_CODE long rawCall(long rc) { return rc == -1 ? -errno : rc; }

[[noreturn]] DOCKHAND_CHILD_CODE void childFail(const ChildPlan& plan, ChildStep step, int index,
                                                long rc) {
  ChildFailure failure{step, index, static_cast<int>(-rc)};
  ::syscall(SYS_write, plan.report_fd, &failure, sizeof failure);
  for (;;) ::syscall(SYS_exit_group, 127);
}

// Moves `fd` to `target`, leaving it open across exec. 0 or -errno.
DOCKHAND_CHILD_CODE long moveFd(int fd, int target) {
  if (fd == target) return rawCall(::syscall(SYS_fcntl, fd, F_SETFD, 0));
  long rc = rawCall(::syscall(SYS_dup3, fd, target, 0));
  return rc < 0 ? rc : 0;
}

[[noreturn]] DOCKHAND_CHILD_CODE void runChild(const ChildPlan& plan) {
  long rc = rawCall(::syscall(SYS_setpgid, 0, 0));
  if (rc != 0) childFail(plan, ChildStep::kSetpgid, 0, rc);
  if ((rc = moveFd(plan.stdin_fd, 0)) != 0 || (rc = moveFd(plan.stdout_fd, 1)) != 0 ||
      (rc = moveFd(plan.stderr_fd, 2)) != 0) {
    childFail(plan, ChildStep::kStdio, 0, rc);
  }
  // Nothing of the agent's but stdio crosses exec (the report pipe is close-on-exec too).
  ::syscall(SYS_close_range, 3u, ~0u, CLOSE_RANGE_CLOEXEC);
  const KernelSigaction dfl{};
  for (int sig = 1; sig < NSIG; ++sig) {
    if (sig != SIGKILL && sig != SIGSTOP) {
      ::syscall(SYS_rt_sigaction, sig, &dfl, nullptr, kKernelSigsetBytes);
    }
  }
  for (int i = 0; i < plan.limit_count; ++i) {
    rlimit limit{plan.limits[i].value, plan.limits[i].value};
    rc = rawCall(::syscall(SYS_prlimit64, 0, plan.limits[i].resource, &limit, nullptr));
    if (rc != 0) childFail(plan, ChildStep::kSetrlimit, i, rc);
  }
  if (plan.switch_user) {
    // These change this process only (glibc's wrappers would try to change every thread of
    // the process they believe exists).
    gid_t groups[1] = {plan.gid};
    if ((rc = rawCall(::syscall(SYS_setgroups, 1, groups))) != 0) {
      childFail(plan, ChildStep::kSetgroups, 0, rc);
    }
    if ((rc = rawCall(::syscall(SYS_setresgid, plan.gid, plan.gid, plan.gid))) != 0) {
      childFail(plan, ChildStep::kSetgid, 0, rc);
    }
    if ((rc = rawCall(::syscall(SYS_setresuid, plan.uid, plan.uid, plan.uid))) != 0) {
      childFail(plan, ChildStep::kSetuid, 0, rc);
    }
  }
  if ((rc = rawCall(::syscall(SYS_chdir, plan.cwd))) != 0) {
    childFail(plan, ChildStep::kChdir, 0, rc);
  }
  const unsigned long none = 0;
  ::syscall(SYS_rt_sigprocmask, SIG_SETMASK, &none, nullptr, kKernelSigsetBytes);
  rc = rawCall(::syscall(SYS_execve, plan.program, plan.argv, plan.envp));
  childFail(plan, ChildStep::kExec, 0, rc);
}

DOCKHAND_CHILD_CODE int childMain(void* plan) { runChild(*static_cast<const ChildPlan*>(plan)); }

constexpr std::size_t kChildStackBytes = 64 * 1024;

using CloneFunction = int (*)(int (*)(void*), void*, int, void*, ...);

// libc's clone. ThreadSanitizer intercepts clone() as if it were fork() and runs its
// after-fork code in the child, which with CLONE_VM rewrites the agent's own runtime state:
// under TSan the call goes to libc's function directly, and TSan sees only a system call
// of the waiting thread (the child runs nothing it instruments).
CloneFunction libcClone() {
#if defined(__SANITIZE_THREAD__)
  constexpr bool kThreadSanitizer = true;
#elif defined(__has_feature)
  constexpr bool kThreadSanitizer = __has_feature(thread_sanitizer);
#else
  constexpr bool kThreadSanitizer = false;
#endif
  if constexpr (kThreadSanitizer) {
    static const CloneFunction found = [] {
      void* libc = ::dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
      void* symbol = libc != nullptr ? ::dlsym(libc, "clone") : nullptr;
      return symbol != nullptr ? reinterpret_cast<CloneFunction>(symbol) : &::clone;
    }();
    return found;
  }
  return &::clone;
}

const char* limitName(__rlimit_resource_t resource) {
  switch (resource) {
    case RLIMIT_NOFILE:
      return "RLIMIT_NOFILE";
    case RLIMIT_NPROC:
      return "RLIMIT_NPROC";
    case RLIMIT_AS:
      return "RLIMIT_AS";
    case RLIMIT_CORE:
      return "RLIMIT_CORE";
    default:
      return "RLIMIT_?";
  }
}

std::string describeFailure(const ChildFailure& failure, const ChildPlan& plan) {
  const std::string error = errnoText(failure.error);
  switch (failure.step) {
    case ChildStep::kSetpgid:
      return "setpgid: " + error;
    case ChildStep::kStdio:
      return "redirecting stdin/stdout/stderr: " + error;
    case ChildStep::kSetrlimit: {
      const auto& limit = plan.limits[std::clamp(failure.index, 0, 3)];
      return std::string("setrlimit(") + limitName(limit.resource) + ", " +
             std::to_string(limit.value) + "): " + error;
    }
    case ChildStep::kSetgroups:
      return "setgroups([" + std::to_string(plan.gid) + "]): " + error;
    case ChildStep::kSetgid:
      return "setgid(" + std::to_string(plan.gid) + "): " + error;
    case ChildStep::kSetuid:
      return "setuid(" + std::to_string(plan.uid) + "): " + error;
    case ChildStep::kChdir:
      return std::string("chdir(") + plan.cwd + "): " + error;
    case ChildStep::kExec:
      return error;
  }
  return error;
}

// Closes the descriptors it holds on every path.
class Fds {
 public:
  Fds() = default;
  ~Fds() {
    for (int fd : fds_) ::close(fd);
  }
  Fds(const Fds&) = delete;
  Fds& operator=(const Fds&) = delete;
  int add(int fd) {
    if (fd >= 0) fds_.push_back(fd);
    return fd;
  }
  void closeOne(int fd) {
    auto it = std::find(fds_.begin(), fds_.end(), fd);
    if (it != fds_.end()) {
      ::close(fd);
      fds_.erase(it);
    }
  }

 private:
  std::vector<int> fds_;
};

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
    env_user_ = std::to_string(euid);
    env_home_ = "/";
    std::vector<char> buffer(4096);
    passwd pw{};
    passwd* found = nullptr;
    if (::getpwuid_r(euid, &pw, buffer.data(), buffer.size(), &found) == 0 && found) {
      env_user_ = pw.pw_name;
      if (pw.pw_dir && *pw.pw_dir) env_home_ = pw.pw_dir;
    }
    if (euid == 0) {
      host_.warn(
          "the agent runs as root and config/user is not set: tasks run as root; set "
          "config/user (e.g. \"nobody\") to run them unprivileged");
    }
  }
  clone_path_ = (identity_ && identity_->switches) || config_.limits.any();
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

  std::vector<std::string> env = buildEnvironment(config_, env_user_, env_home_, spec.env);
  std::vector<char*> envp;
  envp.reserve(env.size() + 1);
  for (auto& item : env) envp.push_back(item.data());
  envp.push_back(nullptr);
  std::vector<char*> argv;
  argv.reserve(spec.argv.size() + 1);
  for (auto& arg : spec.argv) argv.push_back(arg.data());
  argv.push_back(nullptr);

  const auto started = Clock::now();
  pid_t pid = -1;
  if (!clone_path_) {
    pid = spawnWithPosixSpawn(spec, argv, envp);
  } else {
    try {
      pid = spawnWithClone(spec, argv, envp);
    } catch (...) {
      takeBack(spec.task_id, spec.work_dir);
      throw;
    }
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

pid_t ProcessRunner::spawnWithPosixSpawn(const TaskSpec& spec, std::vector<char*>& argv,
                                         std::vector<char*>& envp) {
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
  int rc =
      spec.search_path
          ? ::posix_spawnp(&pid, argv[0], setup.actions(), setup.attr(), argv.data(), envp.data())
          : ::posix_spawn(&pid, argv[0], setup.actions(), setup.attr(), argv.data(), envp.data());
  if (rc != 0) {
    throw sdk::Error(DH_ERROR, "cannot start '" + spec.argv.front() + "': " + errnoText(rc));
  }
  return pid;
}

pid_t ProcessRunner::spawnWithClone(const TaskSpec& spec, std::vector<char*>& argv,
                                    std::vector<char*>& envp) {
  const bool switch_user = identity_ && identity_->switches;
  if (switch_user) {
    // The task user owns its work directory (outputs, inputs) while it runs; the agent
    // takes it back when the task ends (report()).
    std::string failure = chownTree(spec.work_dir, identity_->uid, identity_->gid, std::nullopt);
    if (!failure.empty()) {
      throw sdk::Error(DH_ERROR, "cannot give the work directory to uid " +
                                     std::to_string(identity_->uid) + ": " + failure);
    }
  }
  const std::string program = spec.search_path ? searchPath(spec.argv.front()) : spec.argv.front();

  Fds fds;
  auto openOutput = [&](const std::string& path) {
    int fd =
        fds.add(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644));
    if (fd < 0) throw sdk::Error(DH_ERROR, "cannot open " + path + ": " + errnoText(errno));
    if (switch_user && ::fchown(fd, identity_->uid, identity_->gid) != 0) {
      throw sdk::Error(DH_ERROR, "cannot give " + path + " to uid " +
                                     std::to_string(identity_->uid) + ": " + errnoText(errno));
    }
    return fd;
  };
  ChildPlan plan;
  plan.stdin_fd = fds.add(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  if (plan.stdin_fd < 0) throw sdk::Error(DH_ERROR, "cannot open /dev/null: " + errnoText(errno));
  plan.stdout_fd = openOutput(spec.work_dir + "/stdout");
  plan.stderr_fd = openOutput(spec.work_dir + "/stderr");
  plan.program = program.c_str();
  plan.argv = argv.data();
  plan.envp = envp.data();
  plan.cwd = spec.cwd.c_str();
  const ResourceLimits& limits = config_.limits;
  for (auto [resource, value] :
       {std::pair{RLIMIT_NOFILE, limits.open_files}, std::pair{RLIMIT_NPROC, limits.processes},
        std::pair{RLIMIT_AS, limits.address_space_bytes},
        std::pair{RLIMIT_CORE, limits.core_bytes}}) {
    if (value) plan.limits[plan.limit_count++] = {resource, static_cast<rlim_t>(*value)};
  }
  plan.switch_user = switch_user;
  if (switch_user) {
    plan.uid = identity_->uid;
    plan.gid = identity_->gid;
  }
  int report[2];
  if (::pipe2(report, O_CLOEXEC) != 0) throw sdk::Error(DH_ERROR, "pipe2: " + errnoText(errno));
  fds.add(report[0]);
  fds.add(report[1]);
  plan.report_fd = report[1];

  // The child shares the agent's memory (CLONE_VM) on a stack of its own, and the agent's
  // thread waits (CLONE_VFORK) until it has exec'd or died: no page tables are copied, which
  // keeps a launch as cheap as posix_spawn's however large the agent is. No signal handler
  // of the agent may run in the child before it resets them all.
  std::vector<char> stack(kChildStackBytes);
  sigset_t all;
  sigset_t old;
  ::sigfillset(&all);
  ::pthread_sigmask(SIG_SETMASK, &all, &old);
  const pid_t pid =
      libcClone()(childMain, stack.data() + stack.size(), CLONE_VM | CLONE_VFORK | SIGCHLD, &plan);
  const int clone_error = errno;
  ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (pid < 0) {
    throw sdk::Error(DH_ERROR,
                     "cannot start '" + spec.argv.front() + "': clone: " + errnoText(clone_error));
  }
  fds.closeOne(report[1]);
  ChildFailure failure{};
  ssize_t n;
  do {
    n = ::read(report[0], &failure, sizeof failure);
  } while (n < 0 && errno == EINTR);
  if (n == 0) return pid;  // the pipe closed on exec
  ::waitpid(pid, nullptr, 0);
  if (n != static_cast<ssize_t>(sizeof failure)) {
    throw sdk::Error(DH_ERROR, "cannot start '" + spec.argv.front() +
                                   "': the child failed before exec without saying why");
  }
  throw sdk::Error(DH_ERROR,
                   "cannot start '" + spec.argv.front() + "': " + describeFailure(failure, plan));
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
