// IoPool: a few threads for blocking file and network work (checksumming task outputs,
// fetching task inputs) so that the core thread and the runners' threads never wait on it.
// Jobs run in the order submitted; the destructor finishes the running ones, drops the rest.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace dockhand::agent {

class IoPool {
 public:
  explicit IoPool(std::size_t threads);
  ~IoPool();
  IoPool(const IoPool&) = delete;
  IoPool& operator=(const IoPool&) = delete;

  // Any thread. A job must not throw (an exception is logged and dropped).
  void submit(std::function<void()> job);

 private:
  void run();

  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::function<void()>> jobs_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace dockhand::agent
