#include "task_spawn.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <linux/close_range.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <ctime>
#include <optional>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "dockhand/base/unique_fd.h"
#include "dockhand/plugin.hpp"
#include "errno_text.h"
#include "proc_tree.h"
#include "task_environment.h"

namespace dockhand::plugins::process {
// The child's plan and what it says back: named (not internal) because ChildLaunch::Plan
// holds them.
namespace child {

// What the child writes into its plan when a step fails, before it exits 127; nothing when
// exec succeeds.
enum class ChildStep : int {
  kNone = 0,
  kSetpgid,
  kStdio,
  kSetrlimit,
  kSetgroups,
  kSetgid,
  kSetuid,
  kChdir,
  kExec
};
struct ChildFailure {
  ChildStep step = ChildStep::kNone;
  int index = 0;  // which limit, for kSetrlimit
  int error = 0;
};

// What the child does between clone and exec, all prepared by the parent: it shares the
// agent's memory, so it only makes system calls and writes nothing but its own stack and
// `failure`.
struct ChildPlan {
  int stdin_fd = -1;
  int stdout_fd = -1;
  int stderr_fd = -1;
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
  ChildFailure* failure = nullptr;
  // The signals whose disposition is not the default (bit sig - 1): the agent's handlers,
  // which must not run in the child, and what it ignores, which the task must not inherit.
  std::uint64_t not_default = 0;
};

}  // namespace child

namespace {

using child::ChildFailure;
using child::ChildPlan;
using child::ChildStep;

// The child runs on a small stack of its own, sharing the agent's memory (and the launching
// thread's thread-local storage) until exec. So it calls no libc function: an interceptor
// would update a sanitizer's state of the parent (ThreadSanitizer took the child's
// sigaction() for the agent's own and its pid for a fork, then reported races and "threads
// after fork" in the agent), and libc's syscall() sets errno on failure, which is the
// launching thread's, running on meanwhile with ExecWait::kNo. Every step is a system call
// made here, and the child code is not instrumented either (AddressSanitizer would take the
// foreign stack for a stack switch before each call that does not return).
#define DOCKHAND_CHILD_CODE __attribute__((no_sanitize("address", "undefined", "thread")))

#if defined(__x86_64__)
constexpr bool kOwnSystemCalls = true;
// The kernel's result: -errno on failure.
DOCKHAND_CHILD_CODE inline long childCall(long number, long a = 0, long b = 0, long c = 0,
                                          long d = 0) {
  long result;
  register long r10 asm("r10") = d;
  asm volatile("syscall"
               : "=a"(result)
               : "a"(number), "D"(a), "S"(b), "d"(c), "r"(r10)
               : "rcx", "r11", "memory");
  return result;
}
#elif defined(__aarch64__)
constexpr bool kOwnSystemCalls = true;
DOCKHAND_CHILD_CODE inline long childCall(long number, long a = 0, long b = 0, long c = 0,
                                          long d = 0) {
  register long x8 asm("x8") = number;
  register long x0 asm("x0") = a;
  register long x1 asm("x1") = b;
  register long x2 asm("x2") = c;
  register long x3 asm("x3") = d;
  asm volatile("svc 0" : "+r"(x0) : "r"(x8), "r"(x1), "r"(x2), "r"(x3) : "memory");
  return x0;
}
#else
// Elsewhere through libc, whose errno is the launching thread's: only while it waits
// (ExecWait::kYes, which kNo then becomes).
constexpr bool kOwnSystemCalls = false;
DOCKHAND_CHILD_CODE inline long childCall(long number, long a = 0, long b = 0, long c = 0,
                                          long d = 0) {
  long rc = ::syscall(number, a, b, c, d);
  return rc == -1 ? -errno : rc;
}
#endif

template <typename T>
DOCKHAND_CHILD_CODE inline long arg(T value) {
  if constexpr (std::is_pointer_v<T>) {
    return reinterpret_cast<long>(value);
  } else {
    return static_cast<long>(value);
  }
}

// The kernel's struct sigaction (not glibc's): all zero is SIG_DFL, no flags, nothing masked.
struct KernelSigaction {
  unsigned long handler;
  unsigned long flags;
  unsigned long restorer;
  unsigned long mask;
};
constexpr long kKernelSigsetBytes = sizeof(unsigned long);

[[noreturn]] DOCKHAND_CHILD_CODE void childFail(const ChildPlan& plan, ChildStep step, int index,
                                                long rc) {
  plan.failure->index = index;
  plan.failure->error = static_cast<int>(-rc);
  plan.failure->step = step;
  // The stores above are read by the agent once this process is gone: they must be made.
  std::atomic_signal_fence(std::memory_order_seq_cst);
  for (;;) childCall(SYS_exit_group, 127);
}

// Moves `fd` to `target`, leaving it open across exec. 0 or -errno.
DOCKHAND_CHILD_CODE long moveFd(int fd, int target) {
  if (fd == target) return childCall(SYS_fcntl, fd, F_SETFD, 0);
  long rc = childCall(SYS_dup3, fd, target, 0);
  return rc < 0 ? rc : 0;
}

[[noreturn]] DOCKHAND_CHILD_CODE void runChild(const ChildPlan& plan) {
  long rc = childCall(SYS_setpgid, 0, 0);
  if (rc != 0) childFail(plan, ChildStep::kSetpgid, 0, rc);
  if ((rc = moveFd(plan.stdin_fd, 0)) != 0 || (rc = moveFd(plan.stdout_fd, 1)) != 0 ||
      (rc = moveFd(plan.stderr_fd, 2)) != 0) {
    childFail(plan, ChildStep::kStdio, 0, rc);
  }
  // Nothing of the agent's but stdio crosses exec.
  childCall(SYS_close_range, 3, arg(~0U), CLOSE_RANGE_CLOEXEC);
  const KernelSigaction dfl{};
  for (int sig = 1; sig < NSIG; ++sig) {
    if ((plan.not_default & (std::uint64_t{1} << (sig - 1))) != 0) {
      childCall(SYS_rt_sigaction, sig, arg(&dfl), 0, kKernelSigsetBytes);
    }
  }
  for (int i = 0; i < plan.limit_count; ++i) {
    rlimit limit{plan.limits[i].value, plan.limits[i].value};
    rc = childCall(SYS_prlimit64, 0, plan.limits[i].resource, arg(&limit), 0);
    if (rc != 0) childFail(plan, ChildStep::kSetrlimit, i, rc);
  }
  if (plan.switch_user) {
    // These change this process only (glibc's wrappers would try to change every thread of
    // the process they believe exists).
    gid_t groups[1] = {plan.gid};
    if ((rc = childCall(SYS_setgroups, 1, arg(groups))) != 0) {
      childFail(plan, ChildStep::kSetgroups, 0, rc);
    }
    if ((rc = childCall(SYS_setresgid, plan.gid, plan.gid, plan.gid)) != 0) {
      childFail(plan, ChildStep::kSetgid, 0, rc);
    }
    if ((rc = childCall(SYS_setresuid, plan.uid, plan.uid, plan.uid)) != 0) {
      childFail(plan, ChildStep::kSetuid, 0, rc);
    }
  }
  if ((rc = childCall(SYS_chdir, arg(plan.cwd))) != 0) {
    childFail(plan, ChildStep::kChdir, 0, rc);
  }
  const unsigned long none = 0;
  childCall(SYS_rt_sigprocmask, SIG_SETMASK, arg(&none), 0, kKernelSigsetBytes);
  rc = childCall(SYS_execve, arg(plan.program), arg(plan.argv), arg(plan.envp));
  childFail(plan, ChildStep::kExec, 0, rc);
}

DOCKHAND_CHILD_CODE int childMain(void* plan) { runChild(*static_cast<const ChildPlan*>(plan)); }

constexpr std::size_t kChildStackBytes = std::size_t{64} * 1024;

using CloneFunction = int (*)(int (*)(void*), void*, int, void*, ...);

// libc's clone. ThreadSanitizer intercepts clone() as if it were fork() and runs its
// after-fork code in the child, which with CLONE_VM rewrites the agent's own runtime state:
// under TSan the call goes to libc's function directly, and TSan sees only a system call
// of the launching thread (the child runs nothing it instruments).
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
    case ChildStep::kNone:
      break;
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

// The words of every launch error: "cannot start '<the command as named>': <why>".
std::string cannotStart(const std::string& command, const std::string& why) {
  return "cannot start '" + command + "': " + why;
}

// 0 when `path` is a file the agent could execute, else the errno exec would fail with.
int programError(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return errno;
  if (!S_ISREG(st.st_mode)) return EACCES;
  return ::faccessat(AT_FDCWD, path.c_str(), X_OK, AT_EACCESS) == 0 ? 0 : errno;
}

// The signals whose disposition is not SIG_DFL now (bit sig - 1), asked of the kernel signal by
// signal (SIGKILL and SIGSTOP never are). Of the kernel, not of libc, which hides the signals of
// its own (SIGCANCEL, SIGSETXID) and their handlers. Setting only these in the child, not all
// 64, takes about 0.1 ms off each launch here.
std::uint64_t askEachSignal() {
  static_assert(NSIG - 1 <= 64);
  std::uint64_t found = 0;
  for (int sig = 1; sig < NSIG; ++sig) {
    KernelSigaction now{};
    if (::syscall(SYS_rt_sigaction, sig, nullptr, &now, kKernelSigsetBytes) != 0) {
      if (sig != SIGKILL && sig != SIGSTOP) found |= std::uint64_t{1} << (sig - 1);
      continue;
    }
    if (now.handler != 0 /* SIG_DFL */) found |= std::uint64_t{1} << (sig - 1);
  }
  return found;
}

// The same from the kernel's SigIgn and SigCgt lines of /proc/self/status (hexadecimal masks,
// bit sig - 1), or nullopt when they cannot be read.
std::optional<std::uint64_t> readDispositions(int status_fd) {
  char text[4096];
  const ssize_t n = ::pread(status_fd, text, sizeof text - 1, 0);
  if (n <= 0) return std::nullopt;
  text[n] = '\0';
  const auto ignored = numberAfter(text, "\nSigIgn:", 16);
  const auto caught = numberAfter(text, "\nSigCgt:", 16);
  if (!ignored || !caught) return std::nullopt;
  return *ignored | *caught;
}

}  // namespace

// Everything the child reads until exec, at addresses that do not move.
struct ChildLaunch::Plan {
  child::ChildPlan steps;
  std::string program;
  std::string cwd;
  std::vector<std::string> argv_text;  // argv_text[0]: the command as the task named it
  std::vector<std::string> env_text;
  std::vector<char*> argv;
  std::vector<char*> envp;
  child::ChildFailure failure;
  // Non-zero until the child has exec'd or ended: the kernel clears it then
  // (CLONE_CHILD_CLEARTID) and wakes a futex waiter.
  alignas(4) pid_t in_use = 1;
  std::unique_ptr<char[]> stack;
};

ChildLaunch::ChildLaunch(std::unique_ptr<Plan> plan) : plan_(std::move(plan)) {}
ChildLaunch::~ChildLaunch() = default;

bool ChildLaunch::done() const { return __atomic_load_n(&plan_->in_use, __ATOMIC_ACQUIRE) == 0; }

bool ChildLaunch::waitDone(std::chrono::milliseconds limit) const {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    const auto left = deadline - std::chrono::steady_clock::now();
    if (left <= std::chrono::steady_clock::duration::zero()) return false;
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(left).count();
    timespec timeout{static_cast<time_t>(ns / 1'000'000'000),
                     static_cast<long>(ns % 1'000'000'000)};
    ::syscall(SYS_futex, &plan_->in_use, FUTEX_WAIT, 1, &timeout, nullptr, 0);
  }
  return true;
}

std::optional<std::string> ChildLaunch::failure() const {
  if (plan_->failure.step == ChildStep::kNone) return std::nullopt;
  return cannotStart(plan_->argv_text.front(), describeFailure(plan_->failure, plan_->steps));
}

SpawnFiles::SpawnFiles() : dev_null_(::open("/dev/null", O_RDONLY | O_CLOEXEC)) {
  if (dev_null_.get() < 0) {
    throw sdk::Error(DH_ERROR, "cannot open /dev/null: " + errnoText(errno));
  }
  status_.reset(::open("/proc/self/status", O_RDONLY | O_CLOEXEC));
  // A /proc that does not read as the kernel answers (another pid namespace's, a stand-in):
  // each launch asks signal by signal instead.
  if (status_.get() >= 0 && readDispositions(status_.get()) != askEachSignal()) status_.reset();
}

std::uint64_t SpawnFiles::signalsNotDefault() const {
  if (status_.get() >= 0) {
    if (auto read = readDispositions(status_.get())) return *read;
  }
  return askEachSignal();
}

std::string searchPath(const std::string& name) {
  const char* path_var = ::getenv("PATH");
  std::string_view path = path_var && *path_var ? path_var : kDefaultPath;
  int error = ENOENT;
  while (true) {
    auto colon = path.find(':');
    std::string_view dir = path.substr(0, colon);
    std::string candidate = dir.empty() ? name : std::string(dir) + "/" + name;
    // As execvp: a file that cannot be executed is passed over, and named if nothing else is.
    const int refused = programError(candidate);
    if (refused == 0) return candidate;
    if (refused == EACCES) error = EACCES;
    if (colon == std::string_view::npos) break;
    path.remove_prefix(colon + 1);
  }
  throw sdk::Error(DH_ERROR, cannotStart(name, errnoText(error)));
}

Spawned spawnTask(const TaskSpec& spec, std::vector<std::string> env, const ResourceLimits& limits,
                  const std::optional<TaskUser>& user, ExecWait wait, const SpawnFiles& files) {
  const bool wait_for_exec = wait == ExecWait::kYes || !kOwnSystemCalls;
  auto owned = std::make_unique<ChildLaunch::Plan>();
  ChildLaunch::Plan& plan = *owned;
  plan.argv_text = spec.argv;
  plan.program = spec.search_path ? searchPath(spec.argv.front()) : spec.argv.front();
  plan.cwd = spec.cwd;
  if (!wait_for_exec && !spec.search_path) {
    // What exec would refuse, said now, as the launch's error: the child no longer can. (A
    // bare command was found by searchPath, which asked the same.)
    const std::string path =
        plan.program.front() == '/' ? plan.program : plan.cwd + "/" + plan.program;
    if (const int error = programError(path); error != 0) {
      throw sdk::Error(DH_ERROR, cannotStart(plan.argv_text.front(), errnoText(error)));
    }
  }
  plan.env_text = std::move(env);
  plan.argv = pointersTo(plan.argv_text);
  plan.envp = pointersTo(plan.env_text);

  auto open_output = [&](const std::string& path) {
    // Emptied only when not empty: O_TRUNC would write the empty file of a reused directory
    // (its times) for nothing.
    UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644));
    if (fd.get() < 0) throw sdk::Error(DH_ERROR, "cannot open " + path + ": " + errnoText(errno));
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0 ||
        (S_ISREG(st.st_mode) && st.st_size > 0 && ::ftruncate(fd.get(), 0) != 0)) {
      throw sdk::Error(DH_ERROR, "cannot empty " + path + ": " + errnoText(errno));
    }
    if (user && ::fchown(fd.get(), user->uid, user->gid) != 0) {
      throw sdk::Error(DH_ERROR, "cannot give " + path + " to uid " + std::to_string(user->uid) +
                                     ": " + errnoText(errno));
    }
    return fd;
  };
  const UniqueFd stdout_fd = open_output(spec.work_dir + "/stdout");
  const UniqueFd stderr_fd = open_output(spec.work_dir + "/stderr");

  ChildPlan& steps = plan.steps;
  steps.stdin_fd = files.devNull();
  steps.stdout_fd = stdout_fd.get();
  steps.stderr_fd = stderr_fd.get();
  steps.program = plan.program.c_str();
  steps.argv = plan.argv.data();
  steps.envp = plan.envp.data();
  steps.cwd = plan.cwd.c_str();
  steps.failure = &plan.failure;
  steps.not_default = files.signalsNotDefault();
  for (auto [resource, value] :
       {std::pair{RLIMIT_NOFILE, limits.open_files}, std::pair{RLIMIT_NPROC, limits.processes},
        std::pair{RLIMIT_AS, limits.address_space_bytes},
        std::pair{RLIMIT_CORE, limits.core_bytes}}) {
    if (value) steps.limits[steps.limit_count++] = {resource, static_cast<rlim_t>(*value)};
  }
  steps.switch_user = user.has_value();
  if (user) {
    steps.uid = user->uid;
    steps.gid = user->gid;
  }
  // Not zeroed: the child uses the top few hundred bytes.
  plan.stack.reset(new char[kChildStackBytes]);

  // The child shares the agent's memory (CLONE_VM) on a stack of its own. With kYes the
  // launching thread waits (CLONE_VFORK) until it has exec'd or died. No signal handler of the
  // agent may run in the child before it resets them all: every signal is blocked across the
  // clone, and the child unblocks them just before exec.
  const int flags = CLONE_VM | CLONE_CHILD_CLEARTID | SIGCHLD | (wait_for_exec ? CLONE_VFORK : 0);
  sigset_t all;
  sigset_t old;
  ::sigfillset(&all);
  ::pthread_sigmask(SIG_SETMASK, &all, &old);
  const pid_t pid = libcClone()(childMain, plan.stack.get() + kChildStackBytes, flags, &steps,
                                nullptr, nullptr, &plan.in_use);
  const int clone_error = errno;
  ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (pid < 0) {
    throw sdk::Error(DH_ERROR,
                     cannotStart(plan.argv_text.front(), "clone: " + errnoText(clone_error)));
  }
  auto launch = std::make_unique<ChildLaunch>(std::move(owned));
  if (!wait_for_exec) {
    // The group exists when this returns, whether or not the child got to its own setpgid
    // yet: a kill of the group right after the launch reaches it. (EACCES: it has exec'd, so
    // it did; ESRCH: it is gone.)
    ::setpgid(pid, pid);
    return {pid, std::move(launch)};
  }
  // The child has exec'd or ended.
  if (auto failure = launch->failure()) {
    ::waitpid(pid, nullptr, 0);
    throw sdk::Error(DH_ERROR, *failure);
  }
  return {pid, nullptr};
}

}  // namespace dockhand::plugins::process
