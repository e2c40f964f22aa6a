#include "core/event_loop.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <exception>
#include <system_error>

#include "dockhand/base/logging.h"

namespace dockhand::agent {

EventLoop::EventLoop() : wake_fd_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
  if (wake_fd_ < 0) {
    throw std::system_error(errno, std::generic_category(), "eventfd for the core thread");
  }
}

EventLoop::~EventLoop() { ::close(wake_fd_); }

template <typename Change>
void EventLoop::changeAndWake(Change&& change) {
  bool wake = false;
  {
    std::lock_guard lock(mutex_);
    change();
    wake = sleeping_;
    sleeping_ = false;  // one write per sleep: whoever comes next finds it woken
  }
  // After the unlock: the loop, woken, takes the mutex without waiting for this thread.
  if (wake) {
    const std::uint64_t one = 1;
    [[maybe_unused]] auto ignored = ::write(wake_fd_, &one, sizeof one);
  }
}

void EventLoop::post(std::function<void()> event) {
  changeAndWake([&] { events_.push_back(std::move(event)); });
}

bool EventLoop::watch(int fd, std::function<void()> on_readable) {
  // Its sleep does not include `fd` yet.
  changeAndWake([&] { watched_.push_back(Watched{fd, std::move(on_readable)}); });
  return true;
}

void EventLoop::unwatch(int fd) {
  // Its sleep must not go on waiting for `fd`.
  changeAndWake([&] { std::erase_if(watched_, [fd](const Watched& w) { return w.fd == fd; }); });
}

Timers::TimerId EventLoop::schedule(Millis delay, std::function<void()> fn) {
  TimerId id = 0;
  changeAndWake([&] {
    id = next_timer_++;
    deadlines_.emplace(SteadyClock::now() + delay, id);
    timers_.emplace(id, std::move(fn));
  });
  return id;
}

void EventLoop::cancel(TimerId id) {
  std::lock_guard lock(mutex_);
  timers_.erase(id);  // its deadline entry is skipped when it comes up
}

void EventLoop::exit(int code) {
  changeAndWake([&] {
    if (!exit_code_) exit_code_ = code;
  });
}

const std::vector<int>& EventLoop::waitLocked(std::unique_lock<std::mutex>& lock, int timeout_ms) {
  std::vector<pollfd>& fds = poll_fds_;
  fds.clear();
  fds.push_back({wake_fd_, POLLIN, 0});
  for (const auto& w : watched_) fds.push_back({w.fd, POLLIN, 0});
  sleeping_ = timeout_ms != 0;
  lock.unlock();
  const int n = ::poll(fds.data(), fds.size(), timeout_ms);
  const int poll_errno = errno;
  lock.lock();
  sleeping_ = false;
  std::vector<int>& ready = ready_;
  ready.clear();
  if (n < 0) {
    if (poll_errno != EINTR) {
      logger("agent")->error("poll on the core thread failed: {}", std::strerror(poll_errno));
    }
    return ready;
  }
  if (fds[0].revents != 0) {
    std::uint64_t count = 0;
    [[maybe_unused]] auto ignored = ::read(wake_fd_, &count, sizeof count);
  }
  for (std::size_t i = 1; i < fds.size(); ++i) {
    if (fds[i].revents != 0) ready.push_back(fds[i].fd);
  }
  return ready;
}

bool EventLoop::runOne(const std::function<void()>& fn, std::unique_lock<std::mutex>& lock,
                       int failure_code) {
  lock.unlock();
  try {
    fn();
  } catch (const std::exception& e) {
    logger("agent")->critical("unexpected error on the core thread: {}", e.what());
    lock.lock();
    if (!exit_code_) exit_code_ = failure_code;
    return false;
  }
  lock.lock();
  return true;
}

int EventLoop::run(int failure_code) {
  std::unique_lock lock(mutex_);
  int since_idle = 0;  // closures run since the idle hook last ran
  int since_look = 0;  // closures run since the watched descriptors were last looked at
  const auto idle = [&] {
    if (!idle_hook_ || since_idle == 0) return false;
    since_idle = 0;
    lock.unlock();
    idle_hook_();
    lock.lock();
    return true;
  };
  // Runs the callbacks of the descriptors found readable that are still watched.
  const auto readable = [&](const std::vector<int>& ready) {
    since_look = 0;
    for (int fd : ready) {
      auto it = std::find_if(watched_.begin(), watched_.end(),
                             [fd](const Watched& w) { return w.fd == fd; });
      if (it == watched_.end()) continue;  // unwatched meanwhile
      const std::function<void()> on_readable = it->on_readable;
      ++since_idle;
      if (!runOne(on_readable, lock, failure_code) || exit_code_) return;
    }
  };
  while (!exit_code_) {
    if ((events_.empty() || since_idle >= kMaxEventsBetweenIdle) && idle()) continue;
    if (!events_.empty() && !watched_.empty() && since_look >= kMaxEventsBetweenIdle) {
      // A long burst of posts does not keep the driver's frames waiting.
      readable(waitLocked(lock, 0));
      continue;
    }
    std::function<void()> next;
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
    } else {
      int timeout_ms = -1;
      if (!deadlines_.empty()) {
        // Rounded up: waking before the deadline would only sleep again.
        const auto left =
            std::chrono::ceil<Millis>(deadlines_.begin()->first - SteadyClock::now()).count();
        timeout_ms = static_cast<int>(std::clamp<std::int64_t>(left, 0, 3600000));
      }
      readable(waitLocked(lock, timeout_ms));
      continue;
    }
    ++since_idle;
    ++since_look;
    runOne(next, lock, failure_code);
  }
  idle();
  return *exit_code_;
}

}  // namespace dockhand::agent
