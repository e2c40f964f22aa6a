#include "task_spawn.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <linux/close_range.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <string_view>
#include <utility>
#include <vector>

#include "dockhand/base/child_spawn.h"
#include "dockhand/plugin.hpp"
#include "errno_text.h"
#include "task_environment.h"

namespace dockhand::plugins::process {
namespace {

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

constexpr std::size_t kChildStackBytes = std::size_t{64} * 1024;

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
    static const CloneFunction kFound = [] {
      void* libc = ::dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
      void* symbol = libc != nullptr ? ::dlsym(libc, "clone") : nullptr;
      return symbol != nullptr ? reinterpret_cast<CloneFunction>(symbol) : &::clone;
    }();
    return kFound;
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
  std::string error = errnoText(failure.error);
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

}  // namespace

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

pid_t spawnWithPosixSpawn(const TaskSpec& spec, char* const* argv, char* const* envp) {
  ChildSpawn child;
  child.ownProcessGroup().cleanSignals().stdinFromNull();
  child.open(1, spec.work_dir + "/stdout", ChildSpawn::kTruncate);
  child.open(2, spec.work_dir + "/stderr", ChildSpawn::kTruncate).chdir(spec.cwd);
  const Result<pid_t> pid = child.start(argv[0], argv, envp, spec.search_path);
  if (!pid) throw sdk::Error(DH_ERROR, pid.error().message);
  return *pid;
}

pid_t spawnWithClone(const TaskSpec& spec, char* const* argv, char* const* envp,
                     const ResourceLimits& limits, const std::optional<TaskUser>& user) {
  const std::string program = spec.search_path ? searchPath(spec.argv.front()) : spec.argv.front();

  Fds fds;
  auto open_output = [&](const std::string& path) {
    int fd =
        fds.add(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644));
    if (fd < 0) throw sdk::Error(DH_ERROR, "cannot open " + path + ": " + errnoText(errno));
    if (user && ::fchown(fd, user->uid, user->gid) != 0) {
      throw sdk::Error(DH_ERROR, "cannot give " + path + " to uid " + std::to_string(user->uid) +
                                     ": " + errnoText(errno));
    }
    return fd;
  };
  ChildPlan plan;
  plan.stdin_fd = fds.add(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  if (plan.stdin_fd < 0) throw sdk::Error(DH_ERROR, "cannot open /dev/null: " + errnoText(errno));
  plan.stdout_fd = open_output(spec.work_dir + "/stdout");
  plan.stderr_fd = open_output(spec.work_dir + "/stderr");
  plan.program = program.c_str();
  plan.argv = argv;
  plan.envp = envp;
  plan.cwd = spec.cwd.c_str();
  for (auto [resource, value] :
       {std::pair{RLIMIT_NOFILE, limits.open_files}, std::pair{RLIMIT_NPROC, limits.processes},
        std::pair{RLIMIT_AS, limits.address_space_bytes},
        std::pair{RLIMIT_CORE, limits.core_bytes}}) {
    if (value) plan.limits[plan.limit_count++] = {resource, static_cast<rlim_t>(*value)};
  }
  plan.switch_user = user.has_value();
  if (user) {
    plan.uid = user->uid;
    plan.gid = user->gid;
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

}  // namespace dockhand::plugins::process
