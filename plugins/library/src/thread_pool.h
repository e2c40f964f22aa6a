// CachedThreadPool: a thread per running job, as Spark's executor runs tasks (a cached thread
// pool): a job goes to an idle thread, or to a new one when none is idle; a thread idle for
// `keep_alive` ends. There is no fixed size: the driver sends no more tasks than the agent's
// cores allow.
//
// Hand-off: submit() gives the job to one idle thread itself (the one idle last, its caches
// warmest) and wakes that thread alone, through the thread's own Doorbell (a futex word): one
// FUTEX_WAKE, and the woken thread starts the job without taking the pool's lock. (A shared
// queue and condition variable cost the woken thread the lock its waker may still hold, and
// glibc's condition variable its own waits: 2.3 futex calls per task on the task threads, 1.4
// on the agent's core thread, at 20,000 tasks a second.)
//
// Threads: submit() and stop() from one thread at a time (the runner's launches, on the call
// thread or the agent's core thread but never both at once; then its destructor). A job runs
// on its worker thread and gets that thread's WorkerThread (its pthread_t, tid and StackSlot,
// for thread dumps).
//
// Lifetime: the pool's state is shared with its threads, so a thread that stop() had to leave
// running (a job that never returns) keeps it alive; stop() joins every thread that ends
// within its bound and detaches the others, which end by themselves when their job returns.
#pragma once

#include <pthread.h>
#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "stack_sampler.h"

namespace dockhand::plugins::library {

// A pool thread, as its job sees it. Lives as long as the thread (and the pool's state).
struct WorkerThread {
  pthread_t thread{};
  pid_t tid = 0;
  StackSlot slot;
};

// One thread waits, any thread rings: a futex word with three states, so that a ring costs a
// FUTEX_WAKE only when the thread sleeps, and a wait neither spins nor yields (libstdc++'s
// semaphore yields thousands of times a second here, on the CPU the agent's core thread needs).
class Doorbell {
 public:
  // Wakes the waiter, or makes its next wait return at once.
  void ring();
  // Waits for a ring, at most `timeout`; true when rung (the ring is used up).
  bool wait(std::chrono::milliseconds timeout);

 private:
  static constexpr std::uint32_t kQuiet = 0;
  static constexpr std::uint32_t kWaiting = 1;
  static constexpr std::uint32_t kRung = 2;
  std::atomic<std::uint32_t> word_{kQuiet};
};

class CachedThreadPool {
 public:
  using Job = std::function<void(WorkerThread&)>;

  explicit CachedThreadPool(std::chrono::milliseconds keep_alive);
  // stop() with a short bound, when not stopped before.
  ~CachedThreadPool();
  CachedThreadPool(const CachedThreadPool&) = delete;
  CachedThreadPool& operator=(const CachedThreadPool&) = delete;

  // Runs `job` on an idle thread or a new one. Throws std::system_error when no thread can be
  // started, std::logic_error after stop().
  void submit(Job job);

  // Ends the idle threads, waits up to `bound` for busy ones to return from their jobs, joins
  // every thread that ended and detaches the others. Returns how many were left running.
  std::size_t stop(std::chrono::milliseconds bound);

  // Threads now, busy or idle (for tests and the log).
  std::size_t threadCount() const;
  // Threads waiting for a job now.
  std::size_t idleThreads() const;

 private:
  struct Worker {
    std::thread thread;
    WorkerThread info;
    Job job;              // given by submit() (under the lock) before the wake
    Doorbell wake;        // rung once per job given, or to stop
    bool exited = false;  // under the lock
  };
  struct State {
    mutable std::mutex mutex;
    std::condition_variable exited;
    std::list<std::unique_ptr<Worker>> workers;
    std::vector<Worker*> idle;  // waiting for a job, the one idle last at the back
    bool stopping = false;
    std::chrono::milliseconds keep_alive;
  };

  static void loop(const std::shared_ptr<State>& state, Worker* worker);
  // Waits for the next job (false: idle for keep_alive, or stopping: the thread ends).
  static bool nextJob(State& state, Worker& worker, Job& job);

  std::shared_ptr<State> state_;
  bool stopped_ = false;
};

}  // namespace dockhand::plugins::library
