#include "thread_pool.h"

#include <unistd.h>

#include <stdexcept>
#include <vector>

namespace dockhand::plugins::library {

CachedThreadPool::CachedThreadPool(std::chrono::milliseconds keep_alive)
    : state_(std::make_shared<State>()) {
  state_->keep_alive = keep_alive;
}

CachedThreadPool::~CachedThreadPool() {
  if (!stopped_) stop(std::chrono::seconds(1));
}

void CachedThreadPool::submit(Job job) {
  std::vector<std::unique_ptr<Worker>> ended;
  bool wake = false;
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
    state_->queue.push_back(std::move(job));
    if (state_->queue.size() > state_->idle) {
      auto worker = std::make_unique<Worker>();
      Worker* raw = worker.get();
      try {
        raw->thread = std::thread([state = state_, raw] { loop(state, raw); });
      } catch (...) {
        state_->queue.pop_back();
        throw;
      }
      state_->workers.push_back(std::move(worker));
    } else {
      wake = true;
    }
  }
  if (wake) state_->work.notify_one();
  // Threads that ended after their keep-alive: they are past their last lock, so these joins
  // are short.
  for (auto& worker : ended) {
    if (worker->thread.joinable()) worker->thread.join();
  }
}

void CachedThreadPool::loop(const std::shared_ptr<State>& state, Worker* worker) {
  worker->info.thread = ::pthread_self();
  ::pthread_setname_np(worker->info.thread, "dh-task");  // shown by top -H, gdb, perf
  worker->info.tid = ::gettid();
  StackSampler::prepareThread();
  std::unique_lock lock(state->mutex);
  for (;;) {
    if (state->queue.empty() && !state->stopping) {
      ++state->idle;
      const bool woken = state->work.wait_for(
          lock, state->keep_alive, [&] { return !state->queue.empty() || state->stopping; });
      --state->idle;
      if (!woken) break;  // idle for keep_alive
    }
    if (state->stopping) break;
    Job job = std::move(state->queue.front());
    state->queue.pop_front();
    lock.unlock();
    job(worker->info);
    job = nullptr;  // what the job holds goes before the lock is taken again
    lock.lock();
  }
  worker->exited = true;
  state->exited.notify_all();
}

std::size_t CachedThreadPool::stop(std::chrono::milliseconds bound) {
  stopped_ = true;
  std::vector<std::unique_ptr<Worker>> ended;
  std::size_t left = 0;
  {
    std::unique_lock lock(state_->mutex);
    state_->stopping = true;
    state_->queue.clear();
    state_->work.notify_all();
    state_->exited.wait_for(lock, bound, [&] {
      for (const auto& worker : state_->workers) {
        if (!worker->exited) return false;
      }
      return true;
    });
    for (auto it = state_->workers.begin(); it != state_->workers.end();) {
      if ((*it)->exited) {
        ended.push_back(std::move(*it));
        it = state_->workers.erase(it);
      } else {
        // Its job never returned: the thread keeps the state (and its Worker) alive.
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

}  // namespace dockhand::plugins::library
