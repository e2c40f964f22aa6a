// RunnerCalls: the thread a task runner's hooks run on, and the watchdog that bounds them.
//
// The executor hands each launch/kill/thread_dump of one runner to its RunnerCalls, which runs
// them in order (FIFO: a kill queued after a launch runs after it) on a thread of its own, so
// that a hook that blocks holds up that runner alone, never the agent's core thread.
//
// A watchdog thread bounds each call by `timeout`. When a call overruns it, the runner is
// stuck for good: the calls queued behind it are dropped (never run), `on_stuck` is called
// once (on the watchdog thread) with the call that overran and the dropped ones, and submit()
// refuses from then on. A stuck call that returns later changes nothing.
//
// Cost on the fast path: a call is one queue push and one wake-up of the call thread; the
// watchdog is woken only when a call starts while it is idle, and otherwise once per `timeout`
// while calls keep coming (no polling).
//
// Lifetime: both threads share their state by shared_ptr. stop() ends them after the queued
// calls; when the call thread does not end in time (a stuck call) both are detached and what
// the calls use must be kept alive by the caller (the executor then leaks the runner).
// `on_stuck` is not called for a call that overruns after stop() began. Calls must not throw.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace dockhand::agent {

class RunnerCalls {
 public:
  struct Call {
    std::string hook;  // "launch", "kill", "thread_dump"
    std::uint64_t task_id = 0;
    std::function<void()> run;
  };
  // What on_stuck gets: the call that overran and the queued calls dropped behind it.
  struct CallInfo {
    std::string hook;
    std::uint64_t task_id = 0;
  };
  using StuckHandler = std::function<void(CallInfo stuck, std::vector<CallInfo> dropped)>;

  RunnerCalls(std::string name, std::chrono::milliseconds timeout, StuckHandler on_stuck);
  // stop(timeout) with the call timeout; the threads are detached if that fails.
  ~RunnerCalls();
  RunnerCalls(const RunnerCalls&) = delete;
  RunnerCalls& operator=(const RunnerCalls&) = delete;

  // Queues a call; false (and `call` is dropped) when the runner is stuck or stopping.
  bool submit(Call call);
  // True once a call overran the timeout.
  bool stuck() const;
  // The call that overran, as "launch() of task 7" ("" when not stuck).
  std::string stuckCall() const;
  // Lets the queued calls run, then ends the threads; waits until `deadline` for them. False
  // when the call thread is still in a call (or has calls left) then: it is detached, and the
  // caller must leak what the calls use. A thread with nothing left to do is always joined.
  bool stop(std::chrono::steady_clock::time_point deadline);

  const std::string& name() const { return name_; }
  std::chrono::milliseconds timeout() const { return timeout_; }

 private:
  struct State;
  static void runCalls(const std::shared_ptr<State>& s);
  static void watchCalls(const std::shared_ptr<State>& s);

  std::string name_;
  std::chrono::milliseconds timeout_;
  std::shared_ptr<State> state_;
  bool stopped_ = false;
};

}  // namespace dockhand::agent
