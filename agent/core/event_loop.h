// EventLoop: the core thread. Runs posted closures in order, then due timers, until exit().
//
// Any thread may post(); only the core thread (the one inside run()) executes closures, so
// the Backend's state needs no lock. Closures posted before a timer fires run before it.
#pragma once

#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <optional>

#include "core/ports.h"

namespace dockhand::agent {

class EventLoop final : public EventSink, public Timers, public Exiter {
 public:
  EventLoop() = default;
  EventLoop(const EventLoop&) = delete;
  EventLoop& operator=(const EventLoop&) = delete;

  void post(std::function<void()> event) override;
  TimePoint now() const override { return SteadyClock::now(); }
  TimerId schedule(Millis delay, std::function<void()> fn) override;
  void cancel(TimerId id) override;
  void exit(int code) override;

  // Runs until exit() and returns its code. An exception escaping a closure is logged and
  // ends the loop with `failure_code`: the agent never goes on in an unknown state.
  int run(int failure_code);

  // Called on the core thread whenever it has run what was posted and is about to wait, after
  // every kMaxEventsBetweenIdle closures in a row, and once when run() ends; must not throw.
  // The driver link sends the frames of a burst of work there in one write. Set before run().
  void setIdleHook(std::function<void()> hook) { idle_hook_ = std::move(hook); }
  static constexpr int kMaxEventsBetweenIdle = 32;

 private:
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::function<void()>> events_;
  std::multimap<TimePoint, TimerId> deadlines_;
  std::map<TimerId, std::function<void()>> timers_;
  TimerId next_timer_ = 1;
  std::optional<int> exit_code_;
  std::function<void()> idle_hook_;
};

}  // namespace dockhand::agent
