// The library runner's task threads (thread_pool.h): the Doorbell that hands a job to one
// thread, and the CachedThreadPool on real threads — reuse of an idle thread, a thread per
// concurrent job, idle threads ending, stop() with a job that does not return, and thousands of
// hand-offs racing the idle timeout. Every wait is bounded.
#include "thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <thread>

namespace dockhand::plugins::library {
namespace {

using namespace std::chrono_literals;

TEST(DoorbellTest, ARingBeforeTheWaitIsNotLost) {
  Doorbell bell;
  bell.ring();
  EXPECT_TRUE(bell.wait(10s));
  EXPECT_FALSE(bell.wait(1ms));  // the ring was used up
}

TEST(DoorbellTest, AWaitWithNoRingEndsAtItsTimeout) {
  Doorbell bell;
  EXPECT_FALSE(bell.wait(20ms));
  bell.ring();  // a later ring still counts
  EXPECT_TRUE(bell.wait(10s));
}

TEST(DoorbellTest, ARingFromAnotherThreadWakesTheWaiter) {
  for (int i = 0; i < 200; ++i) {
    Doorbell bell;
    std::thread ringer([&bell] { bell.ring(); });
    EXPECT_TRUE(bell.wait(10s)) << "round " << i;
    ringer.join();
  }
}

// Counts finished jobs and lets a test wait (bounded) for a number of them.
class Finished {
 public:
  void one() {
    std::lock_guard lock(mutex_);
    ++count_;
    changed_.notify_all();
  }
  bool waitFor(int count) {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, 10s, [&] { return count_ >= count; });
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  int count_ = 0;
};

bool eventually(const std::function<bool()>& condition) {
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (!condition()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

TEST(CachedThreadPoolTest, JobsOneAfterAnotherReuseOneThread) {
  CachedThreadPool pool(10s);
  Finished finished;
  std::set<pid_t> tids;
  std::mutex tids_mutex;
  for (int i = 1; i <= 50; ++i) {
    pool.submit([&](WorkerThread& worker) {
      {
        std::lock_guard lock(tids_mutex);
        tids.insert(worker.tid);
      }
      finished.one();
    });
    ASSERT_TRUE(finished.waitFor(i));
    // The thread puts itself back on the idle list after its job: the next job finds it there.
    ASSERT_TRUE(eventually([&] { return pool.idleThreads() == 1; }));
  }
  EXPECT_EQ(tids.size(), 1u);
  EXPECT_EQ(pool.threadCount(), 1u);
  EXPECT_EQ(pool.stop(5s), 0u);
}

TEST(CachedThreadPoolTest, ConcurrentJobsGetAThreadEach) {
  CachedThreadPool pool(10s);
  std::mutex mutex;
  std::condition_variable cv;
  int started = 0;
  bool go = false;
  Finished finished;
  for (int i = 0; i < 3; ++i) {
    pool.submit([&](WorkerThread&) {
      std::unique_lock lock(mutex);
      ++started;
      cv.notify_all();
      cv.wait_for(lock, 10s, [&] { return go; });
      lock.unlock();
      finished.one();
    });
  }
  {
    std::unique_lock lock(mutex);
    ASSERT_TRUE(cv.wait_for(lock, 10s, [&] { return started == 3; }));
    EXPECT_EQ(pool.threadCount(), 3u);
    go = true;
    cv.notify_all();
  }
  ASSERT_TRUE(finished.waitFor(3));
  EXPECT_EQ(pool.stop(5s), 0u);
}

TEST(CachedThreadPoolTest, AnIdleThreadEndsAfterItsKeepAlive) {
  CachedThreadPool pool(20ms);
  Finished finished;
  pool.submit([&](WorkerThread&) { finished.one(); });
  ASSERT_TRUE(finished.waitFor(1));
  EXPECT_TRUE(eventually([&] { return pool.threadCount() == 0; }));
  // A job after that gets a new thread.
  pool.submit([&](WorkerThread&) { finished.one(); });
  EXPECT_TRUE(finished.waitFor(2));
  EXPECT_EQ(pool.stop(5s), 0u);
}

TEST(CachedThreadPoolTest, StopLeavesAJobThatDoesNotReturnAndRefusesMore) {
  CachedThreadPool pool(10s);
  // Shared with the job left running: it may still be inside them when the test returns.
  auto release = std::make_shared<std::atomic<bool>>(false);
  auto finished = std::make_shared<Finished>();
  pool.submit([release, finished](WorkerThread&) {
    while (!release->load()) std::this_thread::sleep_for(1ms);
    finished->one();
  });
  pool.submit([finished](WorkerThread&) { finished->one(); });
  ASSERT_TRUE(finished->waitFor(1));
  EXPECT_EQ(pool.stop(50ms), 1u);  // the idle thread ended; the busy one is left running
  EXPECT_THROW(pool.submit([](WorkerThread&) {}), std::logic_error);
  *release = true;
  EXPECT_TRUE(finished->waitFor(2));  // it ends on its own, its state still alive
}

TEST(CachedThreadPoolTest, ThousandsOfHandOffsRacingTheIdleTimeoutLoseNoJob) {
  // A keep-alive of 1 ms: threads time out while jobs are handed to them, the race between a
  // wait running out and submit() taking the thread off the idle list.
  CachedThreadPool pool(1ms);
  Finished finished;
  constexpr int kJobs = 5000;
  for (int i = 0; i < kJobs; ++i) {
    pool.submit([&](WorkerThread&) { finished.one(); });
    if (i % 7 == 0) std::this_thread::sleep_for(std::chrono::microseconds(500));
  }
  EXPECT_TRUE(finished.waitFor(kJobs));
  EXPECT_EQ(pool.stop(5s), 0u);
}

}  // namespace
}  // namespace dockhand::plugins::library
