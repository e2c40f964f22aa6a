#include "stack_sampler.h"

#include <cxxabi.h>
#include <dlfcn.h>
#include <execinfo.h>
#include <signal.h>
#include <ucontext.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <mutex>
#include <system_error>

#include "dockhand/plugin.h"

namespace dockhand::plugins::library {
namespace {

std::mutex gInstallMutex;
int gInstalled = 0;  // StackSamplers alive
bool gPinned = false;
struct sigaction gPrevious {};

void onSampleSignal(int /*sig*/, siginfo_t* info, void* context) {
  const int saved_errno = errno;
  // Only this process's own pthread_sigqueue carries a slot.
  if (info != nullptr && info->si_code == SI_QUEUE && info->si_pid == ::getpid() &&
      info->si_value.sival_ptr != nullptr) {
    auto* slot = static_cast<StackSlot*>(info->si_value.sival_ptr);
    const std::uint64_t generation = slot->wanted.load();
    std::uintptr_t pc = 0;
#if defined(__x86_64__)
    pc = static_cast<std::uintptr_t>(static_cast<ucontext_t*>(context)->uc_mcontext.gregs[REG_RIP]);
#elif defined(__aarch64__)
    pc = static_cast<std::uintptr_t>(static_cast<ucontext_t*>(context)->uc_mcontext.pc);
#else
    (void)context;
#endif
    slot->interrupted_pc.store(pc);
    slot->count.store(::backtrace(slot->frames, StackSlot::kMaxFrames));
    slot->answered.store(generation);
    ::sem_post(&slot->done);
  }
  errno = saved_errno;
}

std::string hex(std::uintptr_t value) {
  char buffer[24];
  std::snprintf(buffer, sizeof buffer, "0x%zx", static_cast<std::size_t>(value));
  return buffer;
}

std::string baseName(const char* path) {
  std::string text = path != nullptr ? path : "?";
  auto slash = text.find_last_of('/');
  return slash == std::string::npos ? text : text.substr(slash + 1);
}

}  // namespace

StackSlot::StackSlot() { ::sem_init(&done, 0, 0); }
StackSlot::~StackSlot() { ::sem_destroy(&done); }

int StackSampler::signalNumber() { return SIGRTMIN + DH_SIGRT_STACK_SAMPLE; }

void StackSampler::prepareThread() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, signalNumber());
  pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
}

StackSampler::StackSampler() {
  // backtrace() loads libgcc_s on its first call, which is not async-signal-safe: do it here.
  void* frames[4];
  ::backtrace(frames, 4);
  std::lock_guard lock(gInstallMutex);
  if (gInstalled++ == 0 && !gPinned) {
    struct sigaction action {};
    action.sa_sigaction = &onSampleSignal;
    action.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&action.sa_mask);
    ::sigaction(signalNumber(), &action, &gPrevious);
  }
}

StackSampler::~StackSampler() {
  std::lock_guard lock(gInstallMutex);
  if (keep_installed_) gPinned = true;
  if (--gInstalled == 0 && !gPinned) ::sigaction(signalNumber(), &gPrevious, nullptr);
}

Result<std::vector<std::string>> StackSampler::sample(pthread_t thread, StackSlot& slot,
                                                      std::chrono::milliseconds timeout) {
  while (::sem_trywait(&slot.done) == 0) {
  }  // answers to earlier, abandoned requests
  const std::uint64_t generation = slot.wanted.load() + 1;
  slot.wanted.store(generation);
  sigval value{};
  value.sival_ptr = &slot;
  if (int error = ::pthread_sigqueue(thread, signalNumber(), value); error != 0) {
    return Error("cannot signal the task's thread: " + std::generic_category().message(error));
  }
  timespec deadline{};
  ::clock_gettime(CLOCK_MONOTONIC, &deadline);
  const auto ms = timeout.count();
  deadline.tv_sec += static_cast<time_t>(ms / 1000);
  deadline.tv_nsec += static_cast<long>((ms % 1000) * 1000000);
  if (deadline.tv_nsec >= 1000000000L) {
    deadline.tv_sec += 1;
    deadline.tv_nsec -= 1000000000L;
  }
  for (;;) {
    if (::sem_clockwait(&slot.done, CLOCK_MONOTONIC, &deadline) != 0) {
      if (errno == EINTR) continue;
      return Error("the task's thread did not answer within " + std::to_string(ms) +
                   " ms (it may be blocked in an uninterruptible call)");
    }
    if (slot.answered.load() == generation) break;
  }
  const int count = slot.count.load();
  const auto pc = slot.interrupted_pc.load();
  // Skip the handler's own frames: start at the frame the signal interrupted.
  int first = count > 2 ? 2 : 0;
  for (int i = 0; i < count; ++i) {
    if (pc != 0 && reinterpret_cast<std::uintptr_t>(slot.frames[i]) == pc) {
      first = i;
      break;
    }
  }
  std::vector<std::string> frames;
  for (int i = first; i < count; ++i) frames.push_back(describeFrame(slot.frames[i]));
  return frames;
}

std::string describeFrame(const void* address) {
  Dl_info info{};
  const auto at = reinterpret_cast<std::uintptr_t>(address);
  if (::dladdr(address, &info) == 0) return "?? (" + hex(at) + ")";
  const std::string object = baseName(info.dli_fname);
  if (info.dli_sname == nullptr) {
    return "?? (" + object + "+" + hex(at - reinterpret_cast<std::uintptr_t>(info.dli_fbase)) + ")";
  }
  int status = 0;
  char* demangled = abi::__cxa_demangle(info.dli_sname, nullptr, nullptr, &status);
  std::string name = (status == 0 && demangled != nullptr) ? demangled : info.dli_sname;
  std::free(demangled);  // NOLINT(cppcoreguidelines-no-malloc): __cxa_demangle's malloc
  return name + "+" + hex(at - reinterpret_cast<std::uintptr_t>(info.dli_saddr)) + " (" + object +
         ")";
}

}  // namespace dockhand::plugins::library
