// StackSampler: the stack of another thread of this process, for thread dumps.
//
// Flow: sample() sends the thread a real-time signal (kSampleSignal) with pthread_sigqueue,
// carrying the address of the thread's StackSlot; the handler, on that thread, captures
// backtrace() into the slot (async-signal-safe once backtrace was called before: the
// constructor does that) and posts the slot's semaphore. sample() waits for it, bounded, then
// symbolises the frames outside the handler (dladdr + abi::__cxa_demangle). Only symbols a
// library exports get names; the others read "?? (library+0xoffset)".
//
// Threads: sample() from one thread at a time per slot (the runner's call thread). A thread
// to be sampled calls prepareThread() first (unblocks the signal). A slot must outlive the
// thread it belongs to: a signal may be delivered late (the thread was in an uninterruptible
// call), after sample() gave up; the slot's generation tells a late answer from a fresh one.
//
// Lifetime: the handler is installed by the first StackSampler of the process and the
// previous disposition restored by the last one, unless keepInstalled() was called (a task
// thread left running may still be signalled late: its library stays loaded for good).
#pragma once

#include <pthread.h>
#include <semaphore.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "dockhand/base/result.h"

namespace dockhand::plugins::library {

struct StackSlot {
  static constexpr int kMaxFrames = 64;
  StackSlot();
  ~StackSlot();
  StackSlot(const StackSlot&) = delete;
  StackSlot& operator=(const StackSlot&) = delete;

  void* frames[kMaxFrames] = {};
  std::atomic<int> count{0};
  std::atomic<std::uintptr_t> interrupted_pc{0};  // where the signal found the thread
  std::atomic<std::uint64_t> wanted{0};           // generation asked for
  std::atomic<std::uint64_t> answered{0};         // generation captured
  sem_t done;
};

class StackSampler {
 public:
  StackSampler();
  ~StackSampler();
  StackSampler(const StackSampler&) = delete;
  StackSampler& operator=(const StackSampler&) = delete;

  // The signal used: SIGRTMIN + DH_SIGRT_STACK_SAMPLE, which plugin.h reserves for it.
  static int signalNumber();
  // Unblocks the signal on the calling thread.
  static void prepareThread();

  // The symbolised frames of `thread`, innermost first; an error when it did not answer
  // within `timeout` or the signal could not be sent (the message says which).
  Result<std::vector<std::string>> sample(pthread_t thread, StackSlot& slot,
                                          std::chrono::milliseconds timeout);

  // Leaves the handler installed when this sampler goes away.
  void keepInstalled() { keep_installed_ = true; }

 private:
  bool keep_installed_ = false;
};

// One frame as text: "function+0x1f (libjob.so)" or "?? (libjob.so+0x1234)".
std::string describeFrame(const void* address);

}  // namespace dockhand::plugins::library
