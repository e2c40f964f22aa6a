// QueueSink: the core thread's queue for tests that play the core thread themselves: any
// thread posts, and the test thread runs the closures in order until what it waits for holds.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>

#include "core/ports.h"

namespace dockhand::testing {

class QueueSink : public agent::EventSink {
 public:
  void post(std::function<void()> event) override {
    {
      std::lock_guard lock(mutex_);
      queue_.push_back(std::move(event));
    }
    posted_.notify_all();
  }

  // Runs posted closures on this thread until `done` holds or `timeout` passes.
  template <class Done>
  bool runUntil(Done&& done, std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!done()) {
      std::function<void()> next;
      {
        std::unique_lock lock(mutex_);
        if (!posted_.wait_until(lock, deadline, [&] { return !queue_.empty(); })) return done();
        next = std::move(queue_.front());
        queue_.pop_front();
      }
      next();
    }
    return true;
  }

 private:
  std::mutex mutex_;
  std::condition_variable posted_;
  std::deque<std::function<void()>> queue_;
};

}  // namespace dockhand::testing
