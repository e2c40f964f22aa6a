// PluginCalls with plain closures: order, the thread calls run on, the watchdog's bound, what
// "stuck" does to queued, waiting and later calls, and stopping. Calls that "hang" wait on a
// gate the test opens at the end, so no thread is left.
#include "plugins/plugin_calls.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "dockhand/metrics/metrics.h"
#include "log_capture.h"
#include "test_processes.h"

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
  std::optional<PluginCalls::CallInfo> stuck;
  std::vector<PluginCalls::CallInfo> dropped;
  int reports = 0;

  PluginCalls::StuckHandler handler() {
    return [this](PluginCalls::CallInfo call, std::vector<PluginCalls::CallInfo> rest) {
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

TEST(PluginCallsTest, RunsCallsInOrderOnOneThreadThatIsNotTheCaller) {
  StuckReport report;
  PluginCalls calls("plugin 'r'", {10s});
  calls.onStuck(report.handler());
  std::mutex mutex;
  std::vector<std::uint64_t> order;
  std::vector<std::thread::id> threads;
  for (std::uint64_t i = 0; i < 200; ++i) {
    ASSERT_TRUE(calls.submit({{"launch", i}, [&, i] {
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
  EXPECT_FALSE(calls.submit({{"kill", 1}, [] {}})) << "a stopped instance takes no calls";
}

TEST(PluginCallsTest, CallsUnderTheTimeoutNeverMakeItStuck) {
  StuckReport report;
  PluginCalls calls("plugin 'r'", {200ms});
  calls.onStuck(report.handler());
  // Calls keep starting across several timeout periods, each well under the bound.
  for (int i = 0; i < 30; ++i) {
    ASSERT_TRUE(calls.submit(
        {{"launch", static_cast<std::uint64_t>(i)}, [] { std::this_thread::sleep_for(20ms); }}));
  }
  ASSERT_TRUE(calls.stop(std::chrono::steady_clock::now() + 10s));
  EXPECT_FALSE(calls.stuck());
  EXPECT_EQ(report.reports, 0);
}

TEST(PluginCallsTest, OverrunMakesItStuckDropsQueuedCallsAndRefusesLaterOnes) {
  StuckReport report;
  auto gate = std::make_shared<Gate>();  // outlives a call the test abandons
  std::atomic<int> ran_after{0};
  {
    PluginCalls calls("plugin 'r'", {100ms});
    calls.onStuck(report.handler());
    ASSERT_TRUE(calls.submit({{"launch", 1}, [] {}}));
    ASSERT_TRUE(calls.submit({{"launch", 7}, [&, gate] { gate->wait(); }}));
    ASSERT_TRUE(calls.submit({{"kill", 3}, [&] { ++ran_after; }}));
    ASSERT_TRUE(calls.submit({{"launch", 8}, [&] { ++ran_after; }}));
    ASSERT_TRUE(report.waitFor(10s));
    EXPECT_TRUE(calls.stuck());
    EXPECT_EQ(calls.stuckCall(),
              "launch() of task 7 did not return within 100 ms (plugin_call_timeout_ms)");
    EXPECT_EQ(calls.stuckReason(),
              "plugin 'r' is stuck: launch() of task 7 did not return within 100 ms "
              "(plugin_call_timeout_ms); restart the agent to use it again");
    EXPECT_EQ(report.stuck->hook, "launch");
    EXPECT_EQ(report.stuck->task_id, 7u);
    ASSERT_EQ(report.dropped.size(), 2u);
    EXPECT_EQ(report.dropped[0].hook, "kill");
    EXPECT_EQ(report.dropped[0].task_id, 3u);
    EXPECT_EQ(report.dropped[1].task_id, 8u);
    EXPECT_FALSE(calls.submit({{"launch", 9}, [&] { ++ran_after; }}));
    // The stuck call is waited for only until the deadline.
    EXPECT_FALSE(calls.stop(std::chrono::steady_clock::now() + 100ms));
    gate->open();  // the call returns late: nothing changes, the detached thread ends
  }
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(ran_after.load(), 0) << "dropped calls never run";
  EXPECT_EQ(report.reports, 1);
}

TEST(PluginCallsTest, CallThatReturnsLateLeavesTheRunnerStuck) {
  StuckReport report;
  auto gate = std::make_shared<Gate>();  // outlives a call the test abandons
  PluginCalls calls("plugin 'r'", {50ms});
  calls.onStuck(report.handler());
  ASSERT_TRUE(calls.submit({{"thread_dump", 2}, [&, gate] { gate->wait(); }}));
  ASSERT_TRUE(report.waitFor(10s));
  gate->open();
  EXPECT_FALSE(calls.submit({{"launch", 3}, [] {}}));
  EXPECT_TRUE(calls.stuck());
  // The call thread is free again, so it stops.
  EXPECT_TRUE(calls.stop(std::chrono::steady_clock::now() + 10s));
}

// What /metrics shows of an instance's calls: each call that returned counted and timed by
// plugin and hook, an error noted during a call counted against its hook, an overrun counted
// as a timeout and the plugin marked stuck.
TEST(PluginCallsTest, CountsCallsErrorsTimeoutsAndStuckByPluginAndHook) {
  auto shared = std::make_shared<metrics::Registry>();
  metrics::Registry& registry = *shared;
  const std::vector<std::string> discover{"metrics-probe", "discover"};
  const std::vector<std::string> launch{"metrics-probe", "launch"};
  StuckReport report;
  auto gate = std::make_shared<Gate>();
  PluginCalls calls("plugin 'metrics-probe'", {100ms, 100ms, shared}, "metrics-probe");
  calls.onStuck(report.handler());
  EXPECT_EQ(
      registry.gauge("dockhand_plugin_stuck", "", {"plugin"}).labels({"metrics-probe"}).value(), 0);
  EXPECT_TRUE(calls.call({"discover"}, [] { return PluginResult{}; }).ok());
  calls.call({"discover"}, [] {
    PluginCalls::noteError();
    return PluginResult{DH_ERROR, {}, "no"};
  });
  PluginCalls::noteError();  // not on a call thread: counts nothing
  auto& calls_total = registry.counter("dockhand_plugin_calls_total", "", {"plugin", "hook"});
  auto& errors = registry.counter("dockhand_plugin_call_errors_total", "", {"plugin", "hook"});
  auto& timeouts = registry.counter("dockhand_plugin_call_timeouts_total", "", {"plugin", "hook"});
  auto& duration = registry.histogram("dockhand_plugin_call_duration_seconds", "",
                                      {"plugin", "hook"}, metrics::latencyBuckets());
  // A call is counted on the call thread once the hook returned, just after its caller got the
  // answer.
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while ((calls_total.labels(discover).value() < 2 || duration.labels(discover).count() < 2) &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(1ms);
  }
  EXPECT_EQ(calls_total.labels(discover).value(), 2U);
  EXPECT_EQ(errors.labels(discover).value(), 1U);
  EXPECT_EQ(duration.labels(discover).count(), 2U);
  EXPECT_EQ(timeouts.labels(discover).value(), 0U);

  ASSERT_TRUE(calls.submit({{"launch", 1}, [gate] { gate->wait(); }}));
  ASSERT_TRUE(report.waitFor(10s));
  EXPECT_EQ(timeouts.labels(launch).value(), 1U);
  EXPECT_EQ(
      registry.gauge("dockhand_plugin_stuck", "", {"plugin"}).labels({"metrics-probe"}).value(), 1);
  gate->open();
  EXPECT_TRUE(calls.stop(std::chrono::steady_clock::now() + 10s));
  // The overrun call returned in the end: counted as a call too.
  EXPECT_EQ(calls_total.labels(launch).value(), 1U);
}

TEST(PluginCallsTest, StopWaitsForACallInProgressOnlyUntilTheDeadline) {
  StuckReport report;
  auto gate = std::make_shared<Gate>();  // outlives a call the test abandons
  {
    PluginCalls calls("plugin 'r'", {1h});
    calls.onStuck(report.handler());
    std::atomic<bool> started{false};
    ASSERT_TRUE(calls.submit({{"kill", 5}, [&, gate] {
                                started = true;
                                gate->wait();
                              }}));
    for (int i = 0; i < 10000 && !started; ++i) std::this_thread::sleep_for(1ms);
    EXPECT_TRUE(started);
    EXPECT_FALSE(calls.stop(std::chrono::steady_clock::now() + 100ms));
    EXPECT_FALSE(calls.stuck()) << "the call has not overrun its own timeout";
    gate->open();
  }
  EXPECT_EQ(report.reports, 0) << "no report once stop() has begun";
}

TEST(PluginCallsTest, CallWaitsForTheAnswerMadeOnTheCallThread) {
  PluginCalls calls("plugin 'r'", {10s});
  std::thread::id ran_on;
  PluginResult answer = calls.call({"discover"}, [&] {
    ran_on = std::this_thread::get_id();
    return PluginResult{DH_OK, R"({"name":"gpu"})", {}};
  });
  EXPECT_TRUE(answer.ok());
  EXPECT_EQ(answer.json, R"({"name":"gpu"})");
  EXPECT_NE(ran_on, std::this_thread::get_id());
  // A refusal of the plugin's own comes back as it is.
  answer = calls.call({"allocate"}, [] { return PluginResult{DH_ERROR, {}, "no such device"}; });
  EXPECT_EQ(answer.status, DH_ERROR);
  EXPECT_EQ(answer.error, "no such device");
}

TEST(PluginCallsTest, CallThatOverrunsIsAnsweredWithAnErrorAndLaterCallsFailAtOnce) {
  StuckReport report;
  auto gate = std::make_shared<Gate>();  // outlives a call the test abandons
  {
    PluginCalls calls("plugin 'hang'", {100ms});
    calls.onStuck(report.handler());
    // A call queued behind the one that hangs is never made; its caller is told why.
    std::optional<PluginResult> queued;
    std::thread behind;
    PluginResult first = calls.call({"allocate"}, [&, gate] {
      behind =
          std::thread([&] { queued = calls.call({"release"}, [] { return PluginResult{}; }); });
      // The second call is queued before this one overruns.
      std::this_thread::sleep_for(20ms);
      gate->wait();
      return PluginResult{};
    });
    EXPECT_EQ(first.status, DH_ERROR);
    EXPECT_EQ(first.error,
              "allocate() did not return within 100 ms (plugin_call_timeout_ms); the call is "
              "abandoned");
    behind.join();
    ASSERT_TRUE(queued.has_value());
    EXPECT_EQ(queued->status, DH_ERROR);
    EXPECT_EQ(queued->error,
              "plugin 'hang' is stuck: allocate() did not return within 100 ms "
              "(plugin_call_timeout_ms); release() was not made");
    ASSERT_TRUE(report.waitFor(10s));
    ASSERT_EQ(report.dropped.size(), 1u);
    EXPECT_EQ(report.dropped[0].hook, "release");

    bool made = false;
    PluginResult later = calls.call({"release"}, [&] {
      made = true;
      return PluginResult{};
    });
    EXPECT_FALSE(made);
    EXPECT_EQ(later.error,
              "plugin 'hang' is stuck: allocate() did not return within 100 ms "
              "(plugin_call_timeout_ms); restart the agent to use it again");
    gate->open();
  }
}

TEST(PluginCallsTest, ACallsOwnBoundReplacesTheTimeoutAndZeroMeansNone) {
  StuckReport report;
  PluginCalls calls("plugin 'm'", {50ms});
  calls.onStuck(report.handler());
  // Unbounded: well past the instance's timeout, and not stuck.
  PluginResult moved = calls.call(
      {"migrate"},
      [] {
        std::this_thread::sleep_for(300ms);
        return PluginResult{DH_OK, "{}", {}};
      },
      0ms);
  EXPECT_TRUE(moved.ok()) << moved.error;
  EXPECT_FALSE(calls.stuck());
  // The next call is bounded again (by its own bound here), and the watchdog sees it.
  auto gate = std::make_shared<Gate>();  // outlives a call the test abandons
  PluginResult late = calls.call(
      {"describe"},
      [&, gate] {
        gate->wait();
        return PluginResult{};
      },
      150ms);
  EXPECT_EQ(late.error, "describe() did not return within 150 ms; the call is abandoned");
  EXPECT_TRUE(calls.stuck());
  gate->open();
  EXPECT_TRUE(calls.stop(std::chrono::steady_clock::now() + 10s));
}

TEST(PluginCallsTest, StopAnswersCallersOfACallItGivesUpOn) {
  auto gate = std::make_shared<Gate>();  // outlives a call the test abandons
  PluginCalls calls("plugin 'm'", {1h});
  std::atomic<bool> started{false};
  std::optional<PluginResult> answer;
  std::thread caller([&] {
    answer = calls.call(
        {"migrate"},
        [&, gate] {
          started = true;
          gate->wait();
          return PluginResult{};
        },
        0ms);
  });
  for (int i = 0; i < 10000 && !started; ++i) std::this_thread::sleep_for(1ms);
  ASSERT_TRUE(started);
  EXPECT_FALSE(calls.stop(std::chrono::steady_clock::now() + 100ms));
  caller.join();  // released by stop(), not by the gate
  ASSERT_TRUE(answer.has_value());
  EXPECT_EQ(answer->error, "plugin 'm' is stopping; the call in progress is abandoned");
  EXPECT_EQ(calls.call({"migrate"}, [] { return PluginResult{}; }).error, "plugin 'm' is stopping");
  gate->open();
}

TEST(PluginCallsTest, AnInstanceNeverCalledStartsNoThreadAndStopsAtOnce) {
  PluginCalls calls("plugin 'idle'", {10s});
  EXPECT_TRUE(calls.stop(std::chrono::steady_clock::now()));
  EXPECT_FALSE(calls.submit({{"launch", 1}, [] {}}));
}

// ---- callHere: a call made on the caller's thread ------------------------------------------

TEST(PluginCallsTest, CallHereRunsOnTheCallersThreadWhenNothingElseIsCalledAndIsCounted) {
  auto shared = std::make_shared<metrics::Registry>();
  metrics::Registry& registry = *shared;
  const std::vector<std::string> labels{"here-probe", "try_launch"};
  auto& calls_total = registry.counter("dockhand_plugin_calls_total", "", {"plugin", "hook"});
  auto& errors = registry.counter("dockhand_plugin_call_errors_total", "", {"plugin", "hook"});
  const auto calls_before = calls_total.labels(labels).value();
  const auto errors_before = errors.labels(labels).value();
  PluginCalls calls("plugin 'here-probe'", {10s, 100ms, shared}, "here-probe");
  std::thread::id ran_on;
  std::optional<PluginResult> answer = calls.callHere({"try_launch", 1}, [&] {
    ran_on = std::this_thread::get_id();
    return PluginResult{};
  });
  ASSERT_TRUE(answer.has_value());
  EXPECT_TRUE(answer->ok());
  EXPECT_EQ(ran_on, std::this_thread::get_id());
  answer = calls.callHere({"try_launch", 2}, [] {
    PluginCalls::noteError();  // as PluginInstance::result does for a failed hook
    return PluginResult{DH_ERROR, {}, "refused"};
  });
  ASSERT_TRUE(answer.has_value());
  EXPECT_EQ(answer->error, "refused");
  EXPECT_EQ(calls_total.labels(labels).value() - calls_before, 2U);
  EXPECT_EQ(errors.labels(labels).value() - errors_before, 1U);
  PluginCalls::noteError();  // outside a call again: counts nothing
  EXPECT_EQ(errors.labels(labels).value() - errors_before, 1U);
  EXPECT_TRUE(calls.stop(std::chrono::steady_clock::now() + 10s));
}

TEST(PluginCallsTest, ACallPastWarnAfterIsLoggedAndCountedOnEitherThread) {
  fakes::LogCapture log("plugin.slow-probe");
  // The limit is far above what a call that does nothing takes, even on a loaded machine, and
  // the slow calls sleep well past it: the test does not hang on the scheduler's timing.
  PluginCalls calls("plugin 'slow-probe'", {10s, 200ms}, "slow-probe");
  EXPECT_TRUE(calls.call({"kill", 3}, [] { return PluginResult{}; }).ok());
  // discover may block (plugin.h): it is not warned about.
  EXPECT_TRUE(calls
                  .call({"discover"},
                        [] {
                          std::this_thread::sleep_for(250ms);
                          return PluginResult{};
                        })
                  .ok());
  EXPECT_EQ(calls.slowCalls(), 0U);
  EXPECT_TRUE(calls
                  .call({"launch", 4},
                        [] {
                          std::this_thread::sleep_for(250ms);
                          return PluginResult{};
                        })
                  .ok());
  // The answer comes from inside the call; the call thread counts it just after.
  EXPECT_TRUE(testing::eventually([&] { return calls.slowCalls() == 1U; }));
  // callHere declines until the call thread has left that call.
  std::optional<PluginResult> here;
  EXPECT_TRUE(testing::eventually([&] {
    here = calls.callHere({"try_launch", 5}, [] {
      std::this_thread::sleep_for(250ms);
      return PluginResult{};
    });
    return here.has_value();
  }));
  EXPECT_EQ(calls.slowCalls(), 2U);
  const std::string text = log.text();
  EXPECT_NE(text.find("launch() of task 4 took "), std::string::npos) << text;
  EXPECT_NE(text.find("(limit 200 ms, plugin_call_warn_ms; slow calls so far: 1): the plugin's "
                      "later calls waited meanwhile"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("try_launch() of task 5 took "), std::string::npos) << text;
  EXPECT_NE(text.find("slow calls so far: 2): it ran on the caller's thread, which waited "
                      "meanwhile"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("discover()"), std::string::npos) << text;
  EXPECT_EQ(text.find("kill()"), std::string::npos) << text;
  EXPECT_TRUE(calls.stop(std::chrono::steady_clock::now() + 10s));
}

TEST(PluginCallsTest, CallHereDeclinesWhileACallRunsOrWaitsSoThatCallsKeepTheirOrder) {
  auto gate = std::make_shared<Gate>();
  PluginCalls calls("plugin 'r'", {10s});
  std::atomic<bool> in_launch{false};
  ASSERT_TRUE(calls.submit({{"launch", 1}, [&, gate] {
                              in_launch = true;
                              gate->wait();
                            }}));
  for (int i = 0; i < 10000 && !in_launch; ++i) std::this_thread::sleep_for(1ms);
  ASSERT_TRUE(in_launch);
  bool ran = false;
  auto here = [&] {
    ran = true;
    return PluginResult{};
  };
  EXPECT_FALSE(calls.callHere({"try_launch", 2}, here).has_value()) << "a call is running";
  ASSERT_TRUE(calls.submit({{"kill", 1}, [] {}}));
  gate->open();
  // The launch returns, and the kill queued behind it still waits or runs: declined until
  // both are done, then made here.
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  std::optional<PluginResult> answer;
  while (!answer && std::chrono::steady_clock::now() < deadline) {
    answer = calls.callHere({"try_launch", 2}, here);
    if (!answer) std::this_thread::sleep_for(1ms);
  }
  ASSERT_TRUE(answer.has_value());
  EXPECT_TRUE(ran);
  EXPECT_TRUE(calls.stop(std::chrono::steady_clock::now() + 10s));
  EXPECT_FALSE(calls.callHere({"try_launch", 3}, here).has_value()) << "stopped";
}

TEST(PluginCallsTest, ACallSubmittedDuringCallHereRunsOnlyAfterItReturned) {
  PluginCalls calls("plugin 'r'", {10s});
  std::mutex mutex;
  std::vector<std::string> order;
  const auto note = [&](const std::string& what) {
    std::lock_guard lock(mutex);
    order.push_back(what);
  };
  std::optional<PluginResult> answer = calls.callHere({"try_launch", 1}, [&] {
    note("here begins");
    // Queued from inside: the call thread starts and must wait for this call to return.
    EXPECT_TRUE(calls.submit({{"kill", 1}, [&] { note("kill"); }}));
    std::this_thread::sleep_for(50ms);
    note("here ends");
    return PluginResult{};
  });
  ASSERT_TRUE(answer.has_value());
  ASSERT_TRUE(calls.stop(std::chrono::steady_clock::now() + 10s));
  EXPECT_EQ(order, (std::vector<std::string>{"here begins", "here ends", "kill"}));
}

TEST(PluginCallsTest, CallHereDeclinesOnceTheInstanceIsStuck) {
  StuckReport report;
  auto gate = std::make_shared<Gate>();
  PluginCalls calls("plugin 'r'", {50ms});
  calls.onStuck(report.handler());
  ASSERT_TRUE(calls.submit({{"launch", 1}, [gate] { gate->wait(); }}));
  ASSERT_TRUE(report.waitFor(10s));
  gate->open();
  // The stuck launch returns; the instance stays stuck, and nothing is made here either.
  std::this_thread::sleep_for(20ms);
  EXPECT_FALSE(calls.callHere({"try_launch", 2}, [] { return PluginResult{}; }).has_value());
  calls.stop(std::chrono::steady_clock::now() + 10s);
}

}  // namespace
}  // namespace dockhand::agent
