// SignalThread with real signals sent to this process: each signal reaches its handler, on the
// signal thread, and the thread ends when the SignalThread goes. Its own executable: the test
// blocks the agent's signals for the whole process, as the agent does before any thread starts.
#include "app/signal_thread.h"

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace dockhand::agent {
namespace {

// What the handlers were called with, in order, and on which thread.
class Calls {
 public:
  SignalHandlers handlers() {
    SignalHandlers h;
    h.stop = [this](const std::string& reason) { add("stop: " + reason); };
    h.reload = [this] { add("reload"); };
    h.restart = [this] { add("restart"); };
    h.decommission = [this] { add("decommission"); };
    return h;
  }
  // Waits, at most 10 s, until `n` calls came.
  std::vector<std::string> wait(std::size_t n) {
    std::unique_lock lock(mutex_);
    changed_.wait_for(lock, std::chrono::seconds(10), [&] { return calls_.size() >= n; });
    return calls_;
  }
  std::vector<std::thread::id> threads() {
    const std::lock_guard lock(mutex_);
    return threads_;
  }

 private:
  void add(std::string call) {
    {
      const std::lock_guard lock(mutex_);
      calls_.push_back(std::move(call));
      threads_.push_back(std::this_thread::get_id());
    }
    changed_.notify_all();
  }
  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<std::string> calls_;
  std::vector<std::thread::id> threads_;
};

TEST(SignalThreadTest, EachSignalReachesItsHandlerOnTheSignalThread) {
  blockAgentSignals(SIGPWR);
  Calls calls;
  {
    const SignalThread thread(SIGPWR, calls.handlers());
    // One at a time: signals of one kind pending together merge into one.
    const std::vector<std::pair<int, std::string>> sent{{SIGHUP, "reload"},
                                                        {SIGUSR2, "restart"},
                                                        {SIGPWR, "decommission"},
                                                        {SIGTERM, "stop: received TERM"},
                                                        {SIGINT, "stop: received INT"}};
    for (std::size_t i = 0; i < sent.size(); ++i) {
      ASSERT_EQ(::kill(::getpid(), sent[i].first), 0);
      const auto got = calls.wait(i + 1);
      ASSERT_EQ(got.size(), i + 1) << "no call for signal " << sent[i].first;
      EXPECT_EQ(got[i], sent[i].second);
    }
  }
  for (const auto& id : calls.threads()) EXPECT_NE(id, std::this_thread::get_id());
}

TEST(SignalThreadTest, WithoutADecommissionSignalSIGPWRIsNotTaken) {
  blockAgentSignals(0);
  // SIGPWR stays unblocked here: ignore it for this process, so that it cannot end the test.
  ::signal(SIGPWR, SIG_IGN);
  Calls calls;
  {
    const SignalThread thread(0, calls.handlers());
    ASSERT_EQ(::kill(::getpid(), SIGPWR), 0);
    ASSERT_EQ(::kill(::getpid(), SIGHUP), 0);
    EXPECT_EQ(calls.wait(1), std::vector<std::string>{"reload"});
  }
  // Had the thread waited for SIGPWR, the pending SIGPWR would have come before its wake-up
  // signal (Linux hands out standard signals before real-time ones), and been called.
  EXPECT_EQ(calls.wait(1), std::vector<std::string>{"reload"});
}

}  // namespace
}  // namespace dockhand::agent
