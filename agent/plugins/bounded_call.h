// Plugin calls that may block for good (a discovery script that never ends, a migration that
// ignores cancel()) run on a thread of their own, and the caller waits for them at most a
// timeout. A call that overruns is given up on: its thread is detached and keeps what it needs
// alive itself (the call owns shared_ptrs to the plugin instance), so nothing it touches is
// freed under it; the process ends it at exit. stuckPluginCalls() counts calls given up on that
// have not returned yet.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

namespace dockhand::agent {

// Calls given up on by callWithTimeout that are still running.
std::uint64_t stuckPluginCalls();

namespace detail {
void noteStuckCall(int delta);
}  // namespace detail

// Runs `call` on a new thread and waits for its result up to `timeout`; nullopt when it did
// not return in time (it keeps running, detached). `call` must own everything it uses. An
// exception it throws in time is rethrown here.
template <class Result>
std::optional<Result> callWithTimeout(std::function<Result()> call,
                                      std::chrono::milliseconds timeout) {
  struct Shared {
    std::mutex mutex;
    std::condition_variable done;
    std::optional<Result> result;
    std::exception_ptr error;
    bool abandoned = false;
  };
  auto shared = std::make_shared<Shared>();
  std::thread([shared, call = std::move(call)] {
    std::optional<Result> result;
    std::exception_ptr error;
    try {
      result.emplace(call());
    } catch (...) {
      error = std::current_exception();
    }
    std::lock_guard lock(shared->mutex);
    if (shared->abandoned) {
      detail::noteStuckCall(-1);
      return;
    }
    shared->result = std::move(result);
    shared->error = error;
    shared->done.notify_one();
  }).detach();
  std::unique_lock lock(shared->mutex);
  if (shared->done.wait_for(lock, timeout,
                            [&] { return shared->result.has_value() || shared->error; })) {
    if (shared->error) std::rethrow_exception(shared->error);
    return std::move(shared->result);
  }
  shared->abandoned = true;
  detail::noteStuckCall(+1);
  return std::nullopt;
}

}  // namespace dockhand::agent
