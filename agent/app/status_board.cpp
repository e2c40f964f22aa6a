#include "app/status_board.h"

#include <utility>

namespace dockhand::agent {

void StatusBoard::set(AgentStatus status) {
  {
    std::lock_guard lock(mutex_);
    status_ = std::move(status);
    requested_ = false;
    ++generation_;
  }
  changed_.notify_all();
}

AgentStatus StatusBoard::fresh(const std::function<void()>& request,
                               std::chrono::milliseconds wait) {
  std::unique_lock lock(mutex_);
  if (closed_) return status_;
  const std::uint64_t seen = generation_;
  if (!requested_) {
    requested_ = true;
    lock.unlock();
    request();
    lock.lock();
  }
  changed_.wait_for(lock, wait, [&] { return generation_ != seen || closed_; });
  return status_;
}

void StatusBoard::close() {
  {
    std::lock_guard lock(mutex_);
    closed_ = true;
  }
  changed_.notify_all();
}

}  // namespace dockhand::agent
