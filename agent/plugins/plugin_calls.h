// PluginCalls: the one policy for calls into a plugin instance. Every hook call of an instance
// (create, a runner's launch/kill/thread_dump, a discovery plugin's discover/describe/allocate/
// release, a migration plugin's migrate) goes through its PluginCalls; only cancel() does not
// (it must reach a migrate() in progress, so it is made at once from the caller's thread).
//
// The calls run in order (FIFO: a kill queued after a launch runs after it), one at a time, on
// a call thread of the instance's own, so that a hook that blocks holds up that instance alone,
// never the agent's core thread. submit() queues a call and returns; call() queues one and waits
// for its answer.
//
// A watchdog bounds each call by the instance's timeout (plugin_call_timeout_ms), or by the
// call's own (a migrate() is bounded by the decommission deadline; zero: unbounded). When a call
// overruns, the instance is **stuck** for the rest of the agent's life:
//   - the call is abandoned (a caller waiting in call() gets an error naming it);
//   - the calls queued behind it are dropped, never made (each waiting caller gets an error);
//   - the stuck handler is told once (on the watchdog thread), with the call and the dropped;
//   - every later call fails at once, naming the call that never returned.
// A stuck call that returns later changes nothing.
//
// A call of a hook that must not block (plugin.h: a runner's hooks, discovery's allocate and
// release) that returns but took longer than the instance's warn_after (plugin_call_warn_ms)
// is logged as a warning naming the call and counted (slowCalls()): on the call thread the
// instance's later calls waited for it, in callHere() the caller did.
//
// Cost on the fast path: a call is one queue push and one wake-up of the call thread; the
// watchdog is woken only when a call starts while it is idle, and otherwise once per timeout
// while calls keep coming (no polling). Both threads start with the first call.
//
// Lifetime: the threads share their state by shared_ptr. stop() lets the queued calls run and
// ends the threads; when the call thread is still in a call at its deadline, both threads are
// detached, the calls left are answered "abandoned", and the caller must keep alive what the
// calls use (PluginInstance then never destroys the plugin; see plugin_instance.h). The stuck
// handler is not called for a call that overruns after stop() began. Calls must not throw.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "plugins/plugin_result.h"

namespace dockhand::metrics {
class Registry;
}  // namespace dockhand::metrics

namespace dockhand::agent {

// How an instance's calls are bounded (agent config plugin_call_timeout_ms,
// plugin_call_warn_ms) and where they are counted.
struct PluginCallSettings {
  std::chrono::milliseconds timeout{60000};   // a call past it makes the instance stuck
  std::chrono::milliseconds warn_after{100};  // a call past it is logged and counted
  // Where the calls are counted and timed (dockhand_plugin_calls_total, ...): the agent's
  // registry; null: one of the instance's own. Shared, because a stuck call's thread may
  // outlive the instance and the agent and still count when it returns.
  std::shared_ptr<metrics::Registry> metrics{};
};

class PluginCalls {
 public:
  using Millis = std::chrono::milliseconds;

  // What a call is, for messages: "launch() of task 7", "discover()".
  struct CallInfo {
    std::string hook;  // "launch", "kill", "thread_dump", "discover", "migrate", "create", ...
    std::uint64_t task_id = 0;  // the task a runner hook is for; 0 for other hooks
    std::string text() const;
  };
  struct Call {
    Call() = default;
    Call(CallInfo call, std::function<void()> body,
         std::function<void(const std::string&)> if_not_done = {},
         std::optional<Millis> bound = std::nullopt)
        : info(std::move(call)),
          run(std::move(body)),
          not_done(std::move(if_not_done)),
          timeout(bound) {}

    CallInfo info;
    std::function<void()> run;
    // Called instead of `run`, or after it overran, when the call will not be (or was not)
    // answered: the reason names the call the instance is stuck in. May be empty. Runs on the
    // watchdog's thread, the caller's (a refused submit) or stop()'s.
    std::function<void(const std::string& reason)> not_done;
    // This call's bound; nullopt: the instance's timeout; zero: none.
    std::optional<Millis> timeout;
  };
  using StuckHandler = std::function<void(CallInfo stuck, std::vector<CallInfo> dropped)>;

  // `plugin` names the instance in messages ("plugin 'x'", "task runner 'x'"); `name` is the
  // plugin's name in the metrics' labels and its logger's ("plugin.<name>"; empty: `plugin`).
  // Each call that returns is counted and timed by plugin and hook, each overrun counted
  // (docs/operations.md#metrics).
  PluginCalls(std::string plugin, PluginCallSettings limits, std::string name = {});
  // stop() with the call timeout; the threads are detached if that fails.
  ~PluginCalls();
  PluginCalls(const PluginCalls&) = delete;
  PluginCalls& operator=(const PluginCalls&) = delete;

  // Who is told when a call overruns (set it before the first call).
  void onStuck(StuckHandler handler);

  // Queues a call; false when the instance is stuck or stopping (then `not_done` was called
  // and `run` never will be).
  bool submit(Call call);
  // Queues `hook` and waits for its answer: the hook's result, or DH_ERROR with the reason it
  // was not answered ("discover() did not return within 60000 ms (plugin_call_timeout_ms); the
  // call is abandoned", or the stuck call that stops it being made). `timeout` as in Call.
  PluginResult call(CallInfo info, std::function<PluginResult()> hook,
                    std::optional<Millis> timeout = std::nullopt);

  // Makes a call on the calling thread instead, for a hook that promises to return at once
  // (a runner's try_launch): only while no call runs or waits on the call thread and the
  // instance is neither stuck nor stopping, else nullopt (queue it then). The call thread
  // makes no call meanwhile, so the instance still sees one call at a time, in order. Counted
  // and timed like the others, not bounded by the watchdog: a hook that blocks here blocks
  // the caller.
  std::optional<PluginResult> callHere(const CallInfo& info,
                                       const std::function<PluginResult()>& hook);

  // True once a call overran.
  bool stuck() const;
  // The call that overran and its bound, as "launch() of task 7 did not return within 60000
  // ms (plugin_call_timeout_ms)"; "" when not stuck.
  std::string stuckCall() const;
  // Why calls fail at once: "<plugin> is stuck: <stuckCall()>; restart the agent to use it
  // again"; "" when not stuck.
  std::string stuckReason() const;

  // Lets the queued calls run, then ends the threads; waits until `deadline` for them. False
  // when the call thread is still in a call then: both are detached, and the caller must keep
  // what the calls use. A thread with nothing left to do is always joined. Idempotent: a second
  // stop() returns whether the call thread has ended by now.
  bool stop(std::chrono::steady_clock::time_point deadline);

  // Counts an error against the call the calling thread is making, when it is a call thread
  // in a call (PluginInstance does, for every status other than DH_OK); else does nothing.
  static void noteError();

  const std::string& plugin() const { return plugin_; }
  Millis timeout() const { return timeout_; }
  // The calls that returned after more than warn_after.
  std::uint64_t slowCalls() const;

  // The counters of one hook (plugin_calls.cpp; public for its file-local helpers).
  struct HookMetrics;

 private:
  struct State;
  static void runCalls(const std::shared_ptr<State>& s);
  static void watchCalls(const std::shared_ptr<State>& s);
  static std::string overrun(const State& s);
  // What a call to a stuck instance is answered (under the lock).
  static std::string refusal(const State& s);
  // The counters of `hook` (under the lock).
  static HookMetrics& hookMetrics(State& s, const std::string& hook);
  // Times a call that returned: counted and, past warn_after, logged and counted as slow.
  static void noteReturned(State& s, HookMetrics& metrics, const CallInfo& info,
                           std::chrono::steady_clock::time_point started, bool on_call_thread);

  std::string plugin_;
  Millis timeout_;
  std::shared_ptr<State> state_;
};

}  // namespace dockhand::agent
