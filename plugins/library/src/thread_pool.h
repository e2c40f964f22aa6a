// CachedThreadPool: a thread per running job, as Spark's executor runs tasks (a cached thread
// pool): a job goes to an idle thread, or to a new one when none is idle; a thread idle for
// `keep_alive` ends. There is no fixed size: the driver sends no more tasks than the agent's
// cores allow.
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

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <thread>

#include "stack_sampler.h"

namespace dockhand::plugins::library {

// A pool thread, as its job sees it. Lives as long as the thread (and the pool's state).
struct WorkerThread {
  pthread_t thread{};
  pid_t tid = 0;
  StackSlot slot;
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

 private:
  struct Worker {
    std::thread thread;
    WorkerThread info;
    bool exited = false;
  };
  struct State {
    mutable std::mutex mutex;
    std::condition_variable work;
    std::condition_variable exited;
    std::deque<Job> queue;
    std::list<std::unique_ptr<Worker>> workers;
    std::size_t idle = 0;
    bool stopping = false;
    std::chrono::milliseconds keep_alive;
  };

  static void loop(const std::shared_ptr<State>& state, Worker* worker);

  std::shared_ptr<State> state_;
  bool stopped_ = false;
};

}  // namespace dockhand::plugins::library
