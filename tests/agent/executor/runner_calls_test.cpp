// RunnerCalls with plain closures: order, the thread calls run on, the watchdog's bound, and
// stopping. Calls that "hang" wait on a gate the test opens at the end, so no thread is left.
#include "executor/runner_calls.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace dockhand::agent {
namespace {

using namespace std::chrono_literals;

// A door calls wait behind until the test opens it.
class Gate {
 public:
  void wait() {
    std::unique_lock lock(mutex_);
    cv_.wait(lock, [&] { return open_; });
  }
  void open() {
    {
      std::lock_guard lock(mutex_);
      open_ = true;
    }
    cv_.notify_all();
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool open_ = false;
};

// What on_stuck reported, waited for with a bound.
struct StuckReport {
  std::mutex mutex;
  std::condition_variable cv;
  std::optional<RunnerCalls::CallInfo> stuck;
  std::vector<RunnerCalls::CallInfo> dropped;
  int reports = 0;

  RunnerCalls::StuckHandler handler() {
    return [this](RunnerCalls::CallInfo call, std::vector<RunnerCalls::CallInfo> rest) {
      std::lock_guard lock(mutex);
      stuck = std::move(call);
      dropped = std::move(rest);
      ++reports;
      cv.notify_all();
    };
  }
  bool waitFor(std::chrono::milliseconds timeout) {
    std::unique_lock lock(mutex);
    return cv.wait_for(lock, timeout, [&] { return stuck.has_value(); });
  }
};

TEST(RunnerCallsTest, RunsCallsInOrderOnOneThreadThatIsNotTheCaller) {
  StuckReport report;
  RunnerCalls calls("r", 10s, report.handler());
  std::mutex mutex;
  std::vector<std::uint64_t> order;
  std::vector<std::thread::id> threads;
  for (std::uint64_t i = 0; i < 200; ++i) {
    ASSERT_TRUE(calls.submit({"launch", i, [&, i] {
                                std::lock_guard lock(mutex);
                                order.push_back(i);
                                threads.push_back(std::this_thread::get_id());
                              }}));
  }
  ASSERT_TRUE(calls.stop(std::chrono::steady_clock::now() + 10s));
  ASSERT_EQ(order.size(), 200u);
  for (std::uint64_t i = 0; i < 200; ++i) EXPECT_EQ(order[i], i);
  for (const auto& id : threads) {
    EXPECT_EQ(id, threads.front());
    EXPECT_NE(id, std::this_thread::get_id());
  }
  EXPECT_FALSE(calls.stuck());
  EXPECT_EQ(report.reports, 0);
  EXPECT_FALSE(calls.submit({"kill", 1, [] {}})) << "a stopped runner takes no calls";
}

TEST(RunnerCallsTest, CallsUnderTheTimeoutNeverMakeItStuck) {
  StuckReport report;
  RunnerCalls calls("r", 200ms, report.handler());
  // Calls keep starting across several timeout periods, each well under the bound.
  for (int i = 0; i < 30; ++i) {
    ASSERT_TRUE(calls.submit(
        {"launch", static_cast<std::uint64_t>(i), [] { std::this_thread::sleep_for(20ms); }}));
  }
  ASSERT_TRUE(calls.stop(std::chrono::steady_clock::now() + 10s));
  EXPECT_FALSE(calls.stuck());
  EXPECT_EQ(report.reports, 0);
}

TEST(RunnerCallsTest, OverrunMakesItStuckDropsQueuedCallsAndRefusesLaterOnes) {
  StuckReport report;
  Gate gate;
  std::atomic<int> ran_after{0};
  {
    RunnerCalls calls("r", 100ms, report.handler());
    ASSERT_TRUE(calls.submit({"launch", 1, [] {}}));
    ASSERT_TRUE(calls.submit({"launch", 7, [&] { gate.wait(); }}));
    ASSERT_TRUE(calls.submit({"kill", 3, [&] { ++ran_after; }}));
    ASSERT_TRUE(calls.submit({"launch", 8, [&] { ++ran_after; }}));
    ASSERT_TRUE(report.waitFor(10s));
    EXPECT_TRUE(calls.stuck());
    EXPECT_EQ(calls.stuckCall(), "launch() of task 7");
    EXPECT_EQ(report.stuck->hook, "launch");
    EXPECT_EQ(report.stuck->task_id, 7u);
    ASSERT_EQ(report.dropped.size(), 2u);
    EXPECT_EQ(report.dropped[0].hook, "kill");
    EXPECT_EQ(report.dropped[0].task_id, 3u);
    EXPECT_EQ(report.dropped[1].task_id, 8u);
    EXPECT_FALSE(calls.submit({"launch", 9, [&] { ++ran_after; }}));
    // The stuck call is waited for only until the deadline.
    EXPECT_FALSE(calls.stop(std::chrono::steady_clock::now() + 100ms));
    gate.open();  // the call returns late: nothing changes, the detached thread ends
  }
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(ran_after.load(), 0) << "dropped calls never run";
  EXPECT_EQ(report.reports, 1);
}

TEST(RunnerCallsTest, CallThatReturnsLateLeavesTheRunnerStuck) {
  StuckReport report;
  Gate gate;
  RunnerCalls calls("r", 50ms, report.handler());
  ASSERT_TRUE(calls.submit({"thread_dump", 2, [&] { gate.wait(); }}));
  ASSERT_TRUE(report.waitFor(10s));
  gate.open();
  EXPECT_FALSE(calls.submit({"launch", 3, [] {}}));
  EXPECT_TRUE(calls.stuck());
  // The call thread is free again, so it stops.
  EXPECT_TRUE(calls.stop(std::chrono::steady_clock::now() + 10s));
}

TEST(RunnerCallsTest, StopWaitsForACallInProgressOnlyUntilTheDeadline) {
  StuckReport report;
  Gate gate;
  {
    RunnerCalls calls("r", 1h, report.handler());
    std::atomic<bool> started{false};
    ASSERT_TRUE(calls.submit({"kill", 5, [&] {
                                started = true;
                                gate.wait();
                              }}));
    for (int i = 0; i < 10000 && !started; ++i) std::this_thread::sleep_for(1ms);
    EXPECT_TRUE(started);
    EXPECT_FALSE(calls.stop(std::chrono::steady_clock::now() + 100ms));
    EXPECT_FALSE(calls.stuck()) << "the call has not overrun its own timeout";
    gate.open();
  }
  EXPECT_EQ(report.reports, 0) << "no report once stop() has begun";
}

}  // namespace
}  // namespace dockhand::agent
