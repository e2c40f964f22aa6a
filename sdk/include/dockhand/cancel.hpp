// dockhand/cancel.hpp: a cancel() that reaches a hook blocked in a socket or a pipe.
//
// migrate() may block for minutes in a network write; the host calls cancel() from another
// thread when the decommission is cancelled or the agent stops, and expects the running call to
// return soon. A flag checked between blocks does not wake a thread sitting in read() or
// write(). A Cancellation does: the hook waits on its descriptor and the cancel descriptor
// together, and cancel() makes the second one ready.
//
//   class MyStore : public dockhand::sdk::BlockMigration {
//     std::string migrate(std::string_view request) override {
//       cancel_.reset();                        // a new call: forget an earlier cancel
//       ... int fd = a non-blocking socket ...
//       switch (cancel_.waitFor(fd, POLLOUT, 30000)) {
//         case dockhand::sdk::Cancellation::Wait::kReady:     ... write what fits ...
//         case dockhand::sdk::Cancellation::Wait::kTimedOut:  ... fail this block ...
//         case dockhand::sdk::Cancellation::Wait::kCancelled: ... answer what is done ...
//       }
//     }
//     void cancel() override { cancel_.cancel(); }
//     dockhand::sdk::Cancellation cancel_;
//   };
//
// Linux only (eventfd). Header-only, C++17, no other dependency; thread-safe as stated per call.
#pragma once

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>

namespace dockhand::sdk {

class Cancellation {
 public:
  enum class Wait { kReady, kTimedOut, kCancelled };

  // Throws std::runtime_error when the kernel gives no eventfd (out of descriptors).
  Cancellation() : fd_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
    if (fd_ < 0) {
      throw std::runtime_error(std::string("cannot create an eventfd: ") + std::strerror(errno));
    }
  }
  ~Cancellation() { ::close(fd_); }
  Cancellation(const Cancellation&) = delete;
  Cancellation& operator=(const Cancellation&) = delete;

  // Any thread, any number of times: every waitFor() from now returns kCancelled at once,
  // until reset().
  void cancel() noexcept {
    cancelled_.store(true);
    const std::uint64_t one = 1;
    [[maybe_unused]] const ssize_t n = ::write(fd_, &one, sizeof one);
  }
  bool cancelled() const noexcept { return cancelled_.load(); }

  // The hook's own thread, at the start of a call: an earlier cancel() is forgotten.
  void reset() noexcept {
    cancelled_.store(false);
    std::uint64_t count = 0;
    [[maybe_unused]] const ssize_t n = ::read(fd_, &count, sizeof count);
  }

  // Waits until `fd` is ready for `events` (POLLIN, POLLOUT), `timeout_ms` has passed (-1:
  // no limit) or cancel() is called. A descriptor in error or hung up counts as ready: the
  // next read or write says why. Retries an interrupted poll for the time left.
  Wait waitFor(int fd, short events, int timeout_ms) const {
    using Clock = std::chrono::steady_clock;
    const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
    for (;;) {
      if (cancelled()) return Wait::kCancelled;
      int left = timeout_ms;
      if (timeout_ms >= 0) {
        const auto ms =
            std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
        left = ms.count() < 0 ? 0 : static_cast<int>(ms.count());
      }
      pollfd fds[2] = {{fd, events, 0}, {fd_, POLLIN, 0}};
      const int ready = ::poll(fds, 2, left);
      if (ready < 0 && errno == EINTR) continue;
      if (cancelled() || (ready > 0 && (fds[1].revents & POLLIN) != 0)) return Wait::kCancelled;
      if (ready > 0) return Wait::kReady;
      if (ready == 0) return Wait::kTimedOut;
      return Wait::kReady;  // poll failed (a bad fd): the caller's read or write says why
    }
  }

 private:
  int fd_;
  std::atomic<bool> cancelled_{false};
};

}  // namespace dockhand::sdk
