#include "blocks/io_pool.h"

#include "dockhand/base/logging.h"
#include "dockhand/base/thread_name.h"

namespace dockhand::agent {

IoPool::IoPool(std::size_t threads) {
  for (std::size_t i = 0; i < threads; ++i)
    threads_.emplace_back([this] {
      nameThisThread("dh-io");
      run();
    });
}

IoPool::~IoPool() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    jobs_.clear();
  }
  wake_.notify_all();
  for (auto& t : threads_) t.join();
}

void IoPool::submit(std::function<void()> job) {
  {
    std::lock_guard lock(mutex_);
    if (stopping_) return;
    jobs_.push_back(std::move(job));
  }
  wake_.notify_one();
}

void IoPool::run() {
  for (;;) {
    std::function<void()> job;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
      if (stopping_) return;
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    try {
      job();
    } catch (const std::exception& e) {
      logger("blocks")->error("background job failed: {}", e.what());
    }
  }
}

}  // namespace dockhand::agent
