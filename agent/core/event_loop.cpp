#include "core/event_loop.h"

#include <exception>

#include "dockhand/base/logging.h"

namespace dockhand::agent {

void EventLoop::post(std::function<void()> event) {
  {
    std::lock_guard lock(mutex_);
    events_.push_back(std::move(event));
  }
  wake_.notify_one();
}

Timers::TimerId EventLoop::schedule(Millis delay, std::function<void()> fn) {
  TimerId id = 0;
  {
    std::lock_guard lock(mutex_);
    id = next_timer_++;
    deadlines_.emplace(SteadyClock::now() + delay, id);
    timers_.emplace(id, std::move(fn));
  }
  wake_.notify_one();
  return id;
}

void EventLoop::cancel(TimerId id) {
  std::lock_guard lock(mutex_);
  timers_.erase(id);  // its deadline entry is skipped when it comes up
}

void EventLoop::exit(int code) {
  {
    std::lock_guard lock(mutex_);
    if (!exit_code_) exit_code_ = code;
  }
  wake_.notify_one();
}

int EventLoop::run(int failure_code) {
  std::unique_lock lock(mutex_);
  int since_idle = 0;  // closures run since the idle hook last ran
  const auto idle = [&] {
    if (!idle_hook_ || since_idle == 0) return false;
    since_idle = 0;
    lock.unlock();
    idle_hook_();
    lock.lock();
    return true;
  };
  while (!exit_code_) {
    std::function<void()> next;
    if ((events_.empty() || since_idle >= kMaxEventsBetweenIdle) && idle()) continue;
    if (!events_.empty()) {
      next = std::move(events_.front());
      events_.pop_front();
    } else if (!deadlines_.empty() && deadlines_.begin()->first <= SteadyClock::now()) {
      TimerId id = deadlines_.begin()->second;
      deadlines_.erase(deadlines_.begin());
      auto it = timers_.find(id);
      if (it == timers_.end()) continue;  // cancelled
      next = std::move(it->second);
      timers_.erase(it);
    } else if (!deadlines_.empty()) {
      wake_.wait_until(lock, deadlines_.begin()->first);
      continue;
    } else {
      wake_.wait(lock);
      continue;
    }
    lock.unlock();
    ++since_idle;
    try {
      next();
    } catch (const std::exception& e) {
      logger("agent")->critical("unexpected error on the core thread: {}", e.what());
      lock.lock();
      if (!exit_code_) exit_code_ = failure_code;
      continue;
    }
    lock.lock();
  }
  idle();
  return *exit_code_;
}

}  // namespace dockhand::agent
