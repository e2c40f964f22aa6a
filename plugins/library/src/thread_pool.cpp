#include "thread_pool.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <ctime>
#include <stdexcept>
#include <vector>

namespace dockhand::plugins::library {

void Doorbell::ring() {
  if (word_.exchange(kRung) == kWaiting) {
    ::syscall(SYS_futex, &word_, FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
  }
}

bool Doorbell::wait(std::chrono::milliseconds timeout) {
  std::uint32_t quiet = kQuiet;
  if (!word_.compare_exchange_strong(quiet, kWaiting)) {
    word_.store(kQuiet);  // rung before the wait began
    return true;
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    const auto left = deadline - std::chrono::steady_clock::now();
    if (left > std::chrono::steady_clock::duration::zero()) {
      const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(left);
      const timespec relative{static_cast<std::time_t>(seconds.count()),
                              static_cast<long>((left - seconds) / std::chrono::nanoseconds(1))};
      // Returns when woken, when the word is no longer kWaiting (EAGAIN), on a signal or at the
      // timeout; the word says which.
      ::syscall(SYS_futex, &word_, FUTEX_WAIT_PRIVATE, kWaiting, &relative, nullptr, 0);
      if (word_.load() == kRung) {
        word_.store(kQuiet);
        return true;
      }
      continue;
    }
    std::uint32_t waiting = kWaiting;
    if (word_.compare_exchange_strong(waiting, kQuiet)) return false;  // nobody rang in time
    word_.store(kQuiet);  // rung just as the time ran out
    return true;
  }
}

CachedThreadPool::CachedThreadPool(std::chrono::milliseconds keep_alive)
    : state_(std::make_shared<State>()) {
  state_->keep_alive = keep_alive;
}

CachedThreadPool::~CachedThreadPool() {
  if (!stopped_) stop(std::chrono::seconds(1));
}

void CachedThreadPool::submit(Job job) {
  std::vector<std::unique_ptr<Worker>> ended;
  Worker* woken = nullptr;
  {
    std::lock_guard lock(state_->mutex);
    if (state_->stopping) throw std::logic_error("the task thread pool is stopped");
    for (auto it = state_->workers.begin(); it != state_->workers.end();) {
      if ((*it)->exited) {
        ended.push_back(std::move(*it));
        it = state_->workers.erase(it);
      } else {
        ++it;
      }
    }
    if (!state_->idle.empty()) {
      woken = state_->idle.back();
      state_->idle.pop_back();
      woken->job = std::move(job);
    } else {
      // No idle thread: a new one, with the job to start with. When it cannot start, the job
      // goes with it and the caller hears why.
      auto worker = std::make_unique<Worker>();
      Worker* raw = worker.get();
      raw->job = std::move(job);
      raw->thread = std::thread([state = state_, raw] { loop(state, raw); });
      state_->workers.push_back(std::move(worker));
    }
  }
  // After the unlock: the woken thread starts its job without waiting for this one.
  if (woken != nullptr) woken->wake.ring();
  // Threads that ended on their own (idle for keep_alive) are joined outside the lock.
  for (auto& worker : ended) {
    if (worker->thread.joinable()) worker->thread.join();
  }
}

void CachedThreadPool::loop(const std::shared_ptr<State>& state, Worker* worker) {
  worker->info.thread = ::pthread_self();
  ::pthread_setname_np(worker->info.thread, "dh-task");  // shown by top -H, gdb, perf
  worker->info.tid = ::gettid();
  StackSampler::prepareThread();
  // The first job was given before the thread started.
  Job job = std::move(worker->job);
  worker->job = nullptr;
  do {
    job(worker->info);
    job = nullptr;  // what the job holds goes before the thread waits for the next
  } while (nextJob(*state, *worker, job));
  std::lock_guard lock(state->mutex);
  worker->exited = true;
  state->exited.notify_all();
}

bool CachedThreadPool::nextJob(State& state, Worker& worker, Job& job) {
  {
    std::lock_guard lock(state.mutex);
    if (state.stopping) return false;
    state.idle.push_back(&worker);
  }
  if (!worker.wake.wait(state.keep_alive)) {
    {
      std::lock_guard lock(state.mutex);
      auto it = std::find(state.idle.begin(), state.idle.end(), &worker);
      if (it != state.idle.end()) {
        state.idle.erase(it);  // idle for keep_alive: the thread ends
        return false;
      }
    }
    // submit() or stop() took it off the idle list as its wait ran out: their ring follows.
    while (!worker.wake.wait(state.keep_alive)) {
    }
  }
  // Given by submit() before its ring (no lock needed: the ring orders it); none from
  // stop(). No one else touches it while this thread is off the idle list.
  job = std::move(worker.job);
  worker.job = nullptr;
  return static_cast<bool>(job);
}

std::size_t CachedThreadPool::stop(std::chrono::milliseconds bound) {
  stopped_ = true;
  std::vector<std::unique_ptr<Worker>> ended;
  std::size_t left = 0;
  {
    std::unique_lock lock(state_->mutex);
    state_->stopping = true;
    for (Worker* idle : state_->idle) idle->wake.ring();  // with no job: it ends
    state_->idle.clear();
    state_->exited.wait_for(lock, bound, [&] {
      return std::all_of(state_->workers.begin(), state_->workers.end(),
                         [](const std::unique_ptr<Worker>& worker) { return worker->exited; });
    });
    for (auto it = state_->workers.begin(); it != state_->workers.end();) {
      if ((*it)->exited) {
        ended.push_back(std::move(*it));
        it = state_->workers.erase(it);
      } else {
        // A job that has not returned: its thread keeps the state alive and ends on its own.
        (*it)->thread.detach();
        ++left;
        ++it;
      }
    }
  }
  for (auto& worker : ended) {
    if (worker->thread.joinable()) worker->thread.join();
  }
  return left;
}

std::size_t CachedThreadPool::threadCount() const {
  std::lock_guard lock(state_->mutex);
  std::size_t count = 0;
  for (const auto& worker : state_->workers) count += worker->exited ? 0 : 1;
  return count;
}

std::size_t CachedThreadPool::idleThreads() const {
  std::lock_guard lock(state_->mutex);
  return state_->idle.size();
}

}  // namespace dockhand::plugins::library
