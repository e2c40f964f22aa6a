// Unit tests of the EventLoop, the agent's core thread: the order in which posted closures and
// timers run, cancelling, exit codes, and a closure that throws. Every test runs the loop on a
// thread of its own and waits for run() with a deadline, so a loop that never exits fails the
// test instead of hanging it.
#include "core/event_loop.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <functional>
#include <future>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>

#include "dockhand/base/logging.h"

namespace dockhand::agent {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr Millis kDeadline{10000};
constexpr int kFailureCode = 70;

// Runs `loop` on a thread of its own and returns run()'s code, or nullopt when run() has not
// returned by `deadline` (the loop is then told to exit, so that the test ends either way).
std::optional<int> runWithDeadline(EventLoop& loop, Millis deadline = kDeadline) {
  auto result = std::async(std::launch::async, [&loop] { return loop.run(kFailureCode); });
  if (result.wait_for(deadline) == std::future_status::ready) return result.get();
  loop.exit(-1);
  result.wait();
  return std::nullopt;
}

TEST(EventLoopTest, ClosuresPostedFromSeveralThreadsKeepEachThreadsOrder) {
  constexpr int kThreads = 4;
  constexpr int kPerThread = 2000;
  EventLoop loop;
  std::vector<std::vector<int>> seen(kThreads);  // touched on the core thread only
  int threads_done = 0;                          // likewise
  std::vector<std::thread> posters;
  posters.reserve(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    posters.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        loop.post([&seen, t, i] { seen[t].push_back(i); });
      }
      loop.post([&] {
        if (++threads_done == kThreads) loop.exit(0);
      });
    });
  }
  const auto code = runWithDeadline(loop);
  for (auto& poster : posters) poster.join();

  ASSERT_EQ(code, 0);
  for (int t = 0; t < kThreads; ++t) {
    ASSERT_EQ(seen[t].size(), static_cast<std::size_t>(kPerThread)) << "thread " << t;
    EXPECT_TRUE(std::is_sorted(seen[t].begin(), seen[t].end())) << "thread " << t;
    EXPECT_EQ(seen[t].front(), 0);
    EXPECT_EQ(seen[t].back(), kPerThread - 1);
  }
}

// The exit path relies on this: what it posts runs before any timer that is due already.
TEST(EventLoopTest, PostedClosuresRunBeforeATimerThatIsAlreadyDue) {
  EventLoop loop;
  std::vector<std::string> order;
  loop.schedule(Millis(0), [&] {
    order.emplace_back("timer");
    loop.exit(0);
  });
  // Posted after the timer was due, each closure posting the next from the core thread.
  loop.post([&] {
    order.emplace_back("a");
    loop.post([&] {
      order.emplace_back("b");
      loop.post([&] { order.emplace_back("c"); });
    });
  });

  ASSERT_EQ(runWithDeadline(loop), 0);
  EXPECT_THAT(order, ElementsAre("a", "b", "c", "timer"));
}

TEST(EventLoopTest, TimersFireInDueOrderNotInScheduleOrder) {
  EventLoop loop;
  std::vector<std::string> order;
  loop.post([&] {
    loop.schedule(Millis(60), [&] {
      order.emplace_back("60 ms");
      loop.exit(0);
    });
    loop.schedule(Millis(20), [&] { order.emplace_back("20 ms"); });
    loop.schedule(Millis(40), [&] { order.emplace_back("40 ms"); });
    loop.schedule(Millis(0), [&] { order.emplace_back("0 ms"); });
  });

  ASSERT_EQ(runWithDeadline(loop), 0);
  EXPECT_THAT(order, ElementsAre("0 ms", "20 ms", "40 ms", "60 ms"));
}

TEST(EventLoopTest, TimerFiresNoEarlierThanItsDelay) {
  EventLoop loop;
  TimePoint scheduled_at;
  TimePoint fired_at;
  loop.post([&] {
    scheduled_at = loop.now();
    loop.schedule(Millis(50), [&] {
      fired_at = loop.now();
      loop.exit(0);
    });
  });

  ASSERT_EQ(runWithDeadline(loop), 0);
  EXPECT_GE(fired_at - scheduled_at, Millis(50));
}

TEST(EventLoopTest, CancelledTimerNeverFires) {
  EventLoop loop;
  std::vector<std::string> order;
  loop.post([&] {
    const auto cancelled = loop.schedule(Millis(10), [&] { order.emplace_back("cancelled"); });
    loop.schedule(Millis(30), [&] {
      order.emplace_back("kept");
      loop.exit(0);
    });
    loop.cancel(cancelled);
  });

  ASSERT_EQ(runWithDeadline(loop), 0);
  EXPECT_THAT(order, ElementsAre("kept"));
}

TEST(EventLoopTest, CancellingAFiredOrUnknownTimerIsHarmless) {
  EventLoop loop;
  std::vector<std::string> order;
  Timers::TimerId fired = 0;
  fired = loop.schedule(Millis(0), [&] {
    order.emplace_back("fired");
    const auto later = loop.schedule(Millis(10), [&] {
      order.emplace_back("later");
      loop.exit(3);
    });
    // Neither may touch the timer just scheduled (nor anything else).
    loop.cancel(fired);
    loop.cancel(later + 1000);
  });

  ASSERT_EQ(runWithDeadline(loop), 3);
  EXPECT_THAT(order, ElementsAre("fired", "later"));
}

TEST(EventLoopTest, RunReturnsTheCodeOfTheFirstExit) {
  EventLoop loop;
  loop.post([&] {
    loop.exit(4);
    loop.exit(5);  // too late: the first code stands
  });
  EXPECT_EQ(runWithDeadline(loop), 4);
}

TEST(EventLoopTest, ExitFromAnotherThreadWakesAnIdleLoop) {
  EventLoop loop;
  std::promise<void> running;
  loop.post([&] { running.set_value(); });
  auto result = std::async(std::launch::async, [&] { return loop.run(kFailureCode); });
  EXPECT_EQ(running.get_future().wait_for(kDeadline), std::future_status::ready);
  // Nothing is posted or scheduled: the loop sleeps until exit() wakes it.
  loop.exit(6);
  const bool woke = result.wait_for(kDeadline) == std::future_status::ready;
  if (!woke) loop.post([] {});  // wakes it another way, so that the test ends
  EXPECT_TRUE(woke) << "exit() did not wake a loop waiting for work";
  EXPECT_EQ(result.get(), 6);
}

TEST(EventLoopTest, ClosureThatThrowsEndsTheLoopWithTheFailureCodeAndIsLogged) {
  std::ostringstream log;
  auto agent_log = logger("agent");
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(log);
  agent_log->sinks().push_back(sink);

  EventLoop loop;
  bool ran_after = false;
  loop.post([] { throw std::runtime_error("state is broken"); });
  loop.post([&] { ran_after = true; });
  const auto code = runWithDeadline(loop);

  auto& sinks = agent_log->sinks();
  sinks.erase(std::remove(sinks.begin(), sinks.end(), sink), sinks.end());
  EXPECT_EQ(code, kFailureCode);
  EXPECT_FALSE(ran_after) << "the loop went on after a closure threw";
  EXPECT_THAT(log.str(), HasSubstr("unexpected error on the core thread: state is broken"));
}

TEST(EventLoopTest, TimerThatThrowsEndsTheLoopWithTheFailureCode) {
  EventLoop loop;
  loop.schedule(Millis(0), [] { throw std::logic_error("bad timer"); });
  EXPECT_EQ(runWithDeadline(loop), kFailureCode);
}

// The idle hook (what the driver link flushes its kept frames in) runs once a burst of posted
// closures has run, not after each, after kMaxEventsBetweenIdle in a row at the latest, and
// once more as run() ends.
TEST(EventLoopTest, TheIdleHookRunsAfterABurstAndAsTheLoopEnds) {
  EventLoop loop;
  std::vector<std::string> trace;
  loop.setIdleHook([&] { trace.emplace_back("idle"); });
  // A burst posted before run(): three closures, then one idle call.
  for (int i = 0; i < 3; ++i) loop.post([&, i] { trace.push_back("e" + std::to_string(i)); });
  // The last one posts the next burst, of more closures than may run between idle calls.
  loop.post([&] {
    trace.emplace_back("burst");
    for (int i = 0; i < EventLoop::kMaxEventsBetweenIdle + 3; ++i) {
      loop.post([&] { trace.emplace_back("b"); });
    }
    loop.post([&] { loop.exit(0); });
  });
  ASSERT_EQ(runWithDeadline(loop), 0);
  std::vector<std::string> expected = {"e0", "e1", "e2", "burst"};
  // "burst" was the 4th closure: 28 more run before the limit calls the hook.
  for (int i = 0; i < EventLoop::kMaxEventsBetweenIdle - 4; ++i) expected.emplace_back("b");
  expected.emplace_back("idle");
  for (int i = 0; i < 7; ++i) expected.emplace_back("b");
  expected.emplace_back("idle");  // as run() ends, after the exit closure
  EXPECT_EQ(trace, expected);
}

TEST(EventLoopTest, NoIdleHookCallWithoutAClosureRunSinceTheLast) {
  EventLoop loop;
  int calls = 0;
  loop.setIdleHook([&] { ++calls; });
  loop.post([&] { loop.schedule(Millis(20), [&] { loop.exit(0); }); });
  ASSERT_EQ(runWithDeadline(loop), 0);
  // After the first closure (then the loop waits for the timer), and after the timer.
  EXPECT_EQ(calls, 2);
}

// A pipe whose ends close with the test.
struct Pipe {
  Pipe() { EXPECT_EQ(::pipe2(fds, O_CLOEXEC | O_NONBLOCK), 0); }
  ~Pipe() {
    ::close(fds[0]);
    ::close(fds[1]);
  }
  Pipe(const Pipe&) = delete;
  Pipe& operator=(const Pipe&) = delete;
  int readEnd() const { return fds[0]; }
  void write(char c) const { EXPECT_EQ(::write(fds[1], &c, 1), 1); }
  std::string drain() const {
    std::string got;
    char c = 0;
    while (::read(fds[0], &c, 1) == 1) got += c;
    return got;
  }
  int fds[2] = {-1, -1};
};

// The driver link's socket is read this way: the core thread itself wakes for the descriptor.
TEST(EventLoopTest, AWatchedDescriptorIsReadOnTheCoreThreadWhenItBecomesReadable) {
  EventLoop loop;
  Pipe pipe;
  std::string read;
  std::thread::id reader;
  std::thread::id core;
  loop.post([&] {
    core = std::this_thread::get_id();
    EXPECT_TRUE(loop.watch(pipe.readEnd(), [&] {
      reader = std::this_thread::get_id();
      read += pipe.drain();
      if (read == "ab") loop.exit(0);
    }));
  });
  // Written from another thread while the loop sleeps with nothing posted.
  std::thread writer([&] {
    pipe.write('a');
    pipe.write('b');
  });
  const auto code = runWithDeadline(loop);
  writer.join();
  ASSERT_EQ(code, 0) << "the loop did not read the descriptor (read: '" << read << "')";
  EXPECT_EQ(reader, core);
}

TEST(EventLoopTest, AnUnwatchedDescriptorIsNotReadAgain) {
  EventLoop loop;
  Pipe pipe;
  int calls = 0;
  loop.post([&] {
    loop.watch(pipe.readEnd(), [&] {
      ++calls;
      loop.unwatch(pipe.readEnd());
      // Left unread: a loop still watching would call again at once, and keep calling.
      loop.schedule(Millis(50), [&] { loop.exit(0); });
    });
    pipe.write('x');
  });
  ASSERT_EQ(runWithDeadline(loop), 0);
  EXPECT_EQ(calls, 1);
}

// Closures that never stop coming do not keep the driver's frames waiting: the watched
// descriptors are looked at every kMaxEventsBetweenIdle closures.
TEST(EventLoopTest, ABusyLoopStillReadsItsWatchedDescriptor) {
  EventLoop loop;
  Pipe pipe;
  std::function<void()> again = [&] { loop.post(again); };
  loop.post([&] {
    loop.watch(pipe.readEnd(), [&] {
      pipe.drain();
      loop.exit(0);
    });
    pipe.write('x');
    again();
  });
  EXPECT_EQ(runWithDeadline(loop), 0) << "the descriptor was never read";
}

}  // namespace
}  // namespace dockhand::agent
