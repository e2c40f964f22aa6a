// EventLoop: the core thread. Runs posted closures in order, then due timers, until exit(); and
// reads the descriptors it is asked to watch (the driver link's socket) on that same thread.
//
// Any thread may post(); only the core thread (the one inside run()) executes closures, so
// the Backend's state needs no lock. Closures posted before a timer fires run before it.
// An idle loop sleeps in poll(2) over an eventfd and the watched descriptors: a post() while it
// sleeps writes the eventfd (one write per sleep, not per post), so a frame from the driver
// wakes the core thread itself, with no other thread in between.
#pragma once

#include <poll.h>

#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <vector>

#include "core/ports.h"

namespace dockhand::agent {

class EventLoop final : public EventSink, public Timers, public Exiter {
 public:
  // Throws std::system_error when no eventfd can be made (the process is out of descriptors).
  EventLoop();
  ~EventLoop() override;
  EventLoop(const EventLoop&) = delete;
  EventLoop& operator=(const EventLoop&) = delete;

  void post(std::function<void()> event) override;
  bool watch(int fd, std::function<void()> on_readable) override;
  void unwatch(int fd) override;
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
  // Also how many closures run in a row before the watched descriptors are looked at again.
  static constexpr int kMaxEventsBetweenIdle = 32;

 private:
  struct Watched {
    int fd = -1;
    std::function<void()> on_readable;
  };

  // Runs `change` under mutex_, then, when the loop sleeps and nobody has woken it yet, writes
  // the eventfd (outside the lock).
  template <typename Change>
  void changeAndWake(Change&& change);
  // Sleeps in poll(2) until a post, a watched descriptor or `timeout_ms` (-1: no limit); 0
  // only looks. Returns the watched descriptors found readable (valid until the next call).
  // Called with `lock` held; releases it while it sleeps.
  const std::vector<int>& waitLocked(std::unique_lock<std::mutex>& lock, int timeout_ms);
  // Runs `fn` as one closure: an exception ends the loop with the failure code. False then.
  bool runOne(const std::function<void()>& fn, std::unique_lock<std::mutex>& lock,
              int failure_code);

  mutable std::mutex mutex_;
  int wake_fd_ = -1;
  bool sleeping_ = false;  // in poll(2), and nobody has written the eventfd since
  std::deque<std::function<void()>> events_;
  std::multimap<TimePoint, TimerId> deadlines_;
  std::map<TimerId, std::function<void()>> timers_;
  std::vector<Watched> watched_;
  std::vector<pollfd> poll_fds_;  // waitLocked's, kept between sleeps (the core thread's)
  std::vector<int> ready_;        // likewise
  TimerId next_timer_ = 1;
  std::optional<int> exit_code_;
  std::function<void()> idle_hook_;
};

}  // namespace dockhand::agent
