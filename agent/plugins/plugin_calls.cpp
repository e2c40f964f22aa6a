#include "plugins/plugin_calls.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <string_view>
#include <thread>
#include <utility>

#include "dockhand/base/logging.h"
#include "dockhand/base/thread_name.h"
#include "dockhand/metrics/metrics.h"

namespace dockhand::agent {

// The counters of one hook of one instance (docs/operations.md#metrics).
struct PluginCalls::HookMetrics {
  metrics::Counter* calls = nullptr;
  metrics::Counter* errors = nullptr;
  metrics::Counter* timeouts = nullptr;
  metrics::Histogram* duration = nullptr;
};

namespace {

using HookMetrics = PluginCalls::HookMetrics;

// The hook the calling thread is in, when it is an instance's call thread in a call: what
// PluginCalls::noteError() counts against.
thread_local HookMetrics* gCurrentHook = nullptr;

HookMetrics makeHookMetrics(metrics::Registry& registry, const std::string& plugin,
                            const std::string& hook) {
  const std::vector<std::string> labels{plugin, hook};
  HookMetrics m;
  m.calls =
      &registry
           .counter("dockhand_plugin_calls_total",
                    "Plugin hook calls that returned, by plugin and hook.", {"plugin", "hook"})
           .labels(labels);
  m.errors = &registry
                  .counter("dockhand_plugin_call_errors_total",
                           "Plugin hook calls that returned a status other than DH_OK.",
                           {"plugin", "hook"})
                  .labels(labels);
  m.timeouts = &registry
                    .counter("dockhand_plugin_call_timeouts_total",
                             "Plugin hook calls that overran their bound "
                             "(plugin_call_timeout_ms); each makes its plugin stuck.",
                             {"plugin", "hook"})
                    .labels(labels);
  m.duration = &registry
                    .histogram("dockhand_plugin_call_duration_seconds",
                               "Time plugin hook calls took, by plugin and hook.",
                               {"plugin", "hook"}, metrics::latencyBuckets())
                    .labels(labels);
  return m;
}

// The hooks plugin.h says must not block (a runner's hooks, discovery's allocate/release): a
// call of one that takes longer than warn_after is logged and counted. create, discover,
// describe and migrate may block.
bool mustNotBlock(const std::string& hook) {
  static constexpr std::array<std::string_view, 9> kQuick{"launch",      "try_launch", "kill",
                                                          "thread_dump", "task_stats", "detach",
                                                          "adopt",       "allocate",   "release"};
  return std::find(kQuick.begin(), kQuick.end(), hook) != kQuick.end();
}

metrics::Gauge& stuckGauge(metrics::Registry& registry, const std::string& plugin) {
  return registry
      .gauge("dockhand_plugin_stuck",
             "1 once a call into the plugin overran its bound: its later calls fail until the "
             "agent restarts.",
             {"plugin"})
      .labels({plugin});
}

}  // namespace

std::string PluginCalls::CallInfo::text() const {
  return hook + "()" + (task_id != 0 ? " of task " + std::to_string(task_id) : std::string());
}

struct PluginCalls::State {
  std::string plugin;
  std::string name;                             // the plugin's name, for the metrics' labels
  std::shared_ptr<metrics::Registry> registry;  // where `hooks` and `stuck_gauge` count
  // Under `mutex`: one entry per hook called so far; the pointers stay valid.
  std::map<std::string, HookMetrics, std::less<>> hooks;
  HookMetrics* current_hook = nullptr;  // of the call in progress
  metrics::Gauge* stuck_gauge = nullptr;
  Millis timeout{0};
  Millis warn_after{0};
  // Held, not looked up when a slow call returns: a call left behind may return while the
  // process exits.
  std::shared_ptr<spdlog::logger> log;
  std::atomic<std::uint64_t> slow_calls{0};
  std::mutex mutex;
  std::condition_variable work;   // the call thread waits for calls
  std::condition_variable watch;  // the watchdog waits for a call to start, or its deadline
  std::condition_variable ended;  // stop() waits for the call thread to end
  std::deque<Call> queue;
  bool started = false;  // the threads run
  bool in_call = false;
  bool here = false;  // a callHere() is in progress: the call thread waits
  Call current;       // info and not_done of the call in progress (its `run` is on the call thread)
  Millis current_timeout{0};
  std::chrono::steady_clock::time_point call_started;
  std::uint64_t calls_started = 0;
  bool watchdog_idle = false;
  bool stopping = false;
  bool stuck = false;
  std::string stuck_call;  // "launch() of task 7 did not return within ..."
  bool call_thread_done = false;
  StuckHandler on_stuck;
  std::thread call_thread;
  std::thread watchdog;
};

std::string PluginCalls::overrun(const State& s) {
  return s.current.info.text() + " did not return within " +
         std::to_string(s.current_timeout.count()) + " ms" +
         (s.current.timeout ? std::string() : std::string(" (plugin_call_timeout_ms)"));
}

void PluginCalls::runCalls(const std::shared_ptr<State>& s) {
  std::unique_lock lock(s->mutex);
  for (;;) {
    s->work.wait(lock, [&] {
      return s->queue.empty() ? s->stopping : !s->here;  // never beside a callHere()
    });
    if (s->queue.empty()) break;  // stopping, and every queued call has run
    Call call = std::move(s->queue.front());
    s->queue.pop_front();
    s->in_call = true;
    s->current.info = call.info;
    s->current.not_done = std::move(call.not_done);
    s->current.timeout = call.timeout;
    s->current_timeout = call.timeout.value_or(s->timeout);
    s->call_started = std::chrono::steady_clock::now();
    ++s->calls_started;
    HookMetrics* metrics = &hookMetrics(*s, call.info.hook);
    s->current_hook = metrics;
    const auto started = s->call_started;
    if (s->watchdog_idle) s->watch.notify_one();
    lock.unlock();
    gCurrentHook = metrics;
    call.run();
    gCurrentHook = nullptr;
    noteReturned(*s, *metrics, call.info, started, /*on_call_thread=*/true);
    call = Call{};  // what the call holds goes before the lock is taken
    lock.lock();
    s->in_call = false;
    s->current.not_done = nullptr;
    // The watchdog of a bounded call looks again at its deadline by itself; one watching an
    // unbounded call waits for this.
    if (s->current_timeout.count() <= 0) s->watch.notify_one();
  }
  s->call_thread_done = true;
  s->ended.notify_all();
  s->watch.notify_one();
}

void PluginCalls::watchCalls(const std::shared_ptr<State>& s) {
  std::unique_lock lock(s->mutex);
  while (!s->call_thread_done) {
    if (!s->in_call) {
      s->watchdog_idle = true;
      s->watch.wait(lock, [&] { return s->in_call || s->call_thread_done; });
      s->watchdog_idle = false;
      continue;
    }
    const std::uint64_t seen = s->calls_started;
    if (s->current_timeout.count() <= 0) {
      s->watch.wait(lock,
                    [&] { return s->call_thread_done || !s->in_call || s->calls_started != seen; });
      continue;
    }
    // The call thread does not wake the watchdog when a bounded call ends (that would cost
    // every call a wake-up): it looks again at the deadline of the call it saw start.
    const auto deadline = s->call_started + s->current_timeout;
    s->watch.wait_until(lock, deadline, [&] { return s->call_thread_done; });
    if (s->call_thread_done) break;
    if (!s->in_call || s->calls_started != seen || std::chrono::steady_clock::now() < deadline) {
      continue;
    }
    s->stuck = true;
    s->stuck_call = overrun(*s);
    if (s->current_hook != nullptr) s->current_hook->timeouts->inc();
    s->stuck_gauge->set(1);
    const bool stopping = s->stopping;
    CallInfo overran = s->current.info;
    auto overran_not_done = std::move(s->current.not_done);
    s->current.not_done = nullptr;
    std::deque<Call> queued;
    queued.swap(s->queue);
    const std::string stuck_call = s->stuck_call;
    const std::string reason = s->plugin + " is stuck: " + stuck_call;
    StuckHandler on_stuck = s->on_stuck;
    lock.unlock();
    if (overran_not_done) overran_not_done(stuck_call + "; the call is abandoned");
    std::vector<CallInfo> dropped;
    dropped.reserve(queued.size());
    for (auto& call : queued) {
      dropped.push_back(call.info);
      if (call.not_done) call.not_done(reason + "; " + call.info.text() + " was not made");
    }
    queued.clear();
    // Once stop() has begun, nobody is told: the instance is going away.
    if (on_stuck && !stopping) on_stuck(std::move(overran), std::move(dropped));
    return;
  }
}

PluginCalls::PluginCalls(std::string plugin, PluginCallSettings limits, std::string name)
    : plugin_(std::move(plugin)), timeout_(limits.timeout), state_(std::make_shared<State>()) {
  state_->plugin = plugin_;
  state_->name = name.empty() ? plugin_ : std::move(name);
  state_->timeout = limits.timeout;
  state_->warn_after = limits.warn_after;
  state_->log = logger("plugin." + state_->name);
  state_->registry =
      limits.metrics ? std::move(limits.metrics) : std::make_shared<metrics::Registry>();
  state_->stuck_gauge = &stuckGauge(*state_->registry, state_->name);
}

void PluginCalls::noteReturned(State& s, HookMetrics& metrics, const CallInfo& info,
                               std::chrono::steady_clock::time_point started, bool on_call_thread) {
  const auto took = std::chrono::steady_clock::now() - started;
  metrics.calls->inc();
  metrics.duration->observe(std::chrono::duration<double>(took).count());
  const auto ms = std::chrono::duration_cast<Millis>(took);
  if (ms <= s.warn_after || !mustNotBlock(info.hook)) return;
  // Noted by one thread at a time (the call thread, or a callHere() while it is idle); the
  // count moves once the warning is written, so that a reader who sees it sees the line too.
  const std::uint64_t slow = s.slow_calls.load() + 1;
  s.log->warn("{} took {} ms (limit {} ms, plugin_call_warn_ms; slow calls so far: {}): {}",
              info.text(), ms.count(), s.warn_after.count(), slow,
              on_call_thread ? "the plugin's later calls waited meanwhile"
                             : "it ran on the caller's thread, which waited meanwhile");
  s.slow_calls.store(slow);
}

std::uint64_t PluginCalls::slowCalls() const { return state_->slow_calls.load(); }

void PluginCalls::noteError() {
  if (gCurrentHook != nullptr) gCurrentHook->errors->inc();
}

PluginCalls::~PluginCalls() { stop(std::chrono::steady_clock::now() + timeout_); }

void PluginCalls::onStuck(StuckHandler handler) {
  std::lock_guard lock(state_->mutex);
  state_->on_stuck = std::move(handler);
}

bool PluginCalls::submit(Call call) {
  std::unique_lock lock(state_->mutex);
  std::string refused;
  if (state_->stuck) {
    refused = refusal(*state_);
  } else if (state_->stopping) {
    refused = plugin_ + " is stopping";
  }
  if (!refused.empty()) {
    lock.unlock();
    if (call.not_done) call.not_done(refused);
    return false;
  }
  if (!state_->started) {
    state_->started = true;
    state_->call_thread = std::thread([s = state_] {
      nameThisThread("dh-call:" + s->name);
      runCalls(s);
    });
    state_->watchdog = std::thread([s = state_] {
      nameThisThread("dh-watch:" + s->name);
      watchCalls(s);
    });
  }
  state_->queue.push_back(std::move(call));
  lock.unlock();
  state_->work.notify_one();
  return true;
}

PluginCalls::HookMetrics& PluginCalls::hookMetrics(State& s, const std::string& hook) {
  auto it = s.hooks.find(hook);
  if (it == s.hooks.end())
    it = s.hooks.emplace(hook, makeHookMetrics(*s.registry, s.name, hook)).first;
  return it->second;
}

std::optional<PluginResult> PluginCalls::callHere(const CallInfo& info,
                                                  const std::function<PluginResult()>& hook) {
  HookMetrics* metrics = nullptr;
  {
    std::lock_guard lock(state_->mutex);
    if (state_->stuck || state_->stopping || state_->in_call || state_->here ||
        !state_->queue.empty()) {
      return std::nullopt;
    }
    state_->here = true;
    metrics = &hookMetrics(*state_, info.hook);
  }
  // Whatever happens in the hook, the call thread may go on afterwards.
  struct Done {
    State& s;
    HookMetrics* outer;
    ~Done() {
      gCurrentHook = outer;
      bool queued = false;
      {
        std::lock_guard lock(s.mutex);
        s.here = false;
        queued = !s.queue.empty();
      }
      if (queued) s.work.notify_one();
    }
  } done{*state_, gCurrentHook};
  gCurrentHook = metrics;
  const auto started = std::chrono::steady_clock::now();
  PluginResult result = hook();
  noteReturned(*state_, *metrics, info, started, /*on_call_thread=*/false);
  return result;
}

PluginResult PluginCalls::call(CallInfo info, std::function<PluginResult()> hook,
                               std::optional<Millis> timeout) {
  struct Answer {
    std::mutex mutex;
    std::condition_variable ready;
    std::optional<PluginResult> result;
  };
  auto answer = std::make_shared<Answer>();
  auto give = [answer](PluginResult result) {
    std::lock_guard lock(answer->mutex);
    if (answer->result) return;  // the first answer counts: an abandoned call's comes too late
    answer->result = std::move(result);
    answer->ready.notify_one();
  };
  submit(Call(
      std::move(info), [hook = std::move(hook), give] { give(hook()); },
      [give](const std::string& reason) {
        give(PluginResult{DH_ERROR, {}, reason});
      },
      timeout));
  std::unique_lock lock(answer->mutex);
  answer->ready.wait(lock, [&] { return answer->result.has_value(); });
  return std::move(*answer->result);
}

bool PluginCalls::stuck() const {
  std::lock_guard lock(state_->mutex);
  return state_->stuck;
}

std::string PluginCalls::stuckCall() const {
  std::lock_guard lock(state_->mutex);
  return state_->stuck ? state_->stuck_call : std::string();
}

std::string PluginCalls::refusal(const State& s) {
  return s.plugin + " is stuck: " + s.stuck_call + "; restart the agent to use it again";
}

std::string PluginCalls::stuckReason() const {
  std::lock_guard lock(state_->mutex);
  return state_->stuck ? refusal(*state_) : std::string();
}

bool PluginCalls::stop(std::chrono::steady_clock::time_point deadline) {
  bool done;
  std::deque<Call> left;
  std::function<void(const std::string&)> current_not_done;
  {
    std::unique_lock lock(state_->mutex);
    if (state_->stopping || !state_->started) {
      state_->stopping = true;
      return !state_->started || state_->call_thread_done;
    }
    state_->stopping = true;
    state_->work.notify_one();
    // Past the deadline only a thread in a call (or with calls still to make) is given up on;
    // one with nothing left to do is about to end.
    done = state_->ended.wait_until(lock, deadline, [&] { return state_->call_thread_done; }) ||
           (!state_->in_call && state_->queue.empty());
    if (!done) {
      // Whoever waits for these calls is told; the queued ones are never made.
      left.swap(state_->queue);
      current_not_done = std::move(state_->current.not_done);
      state_->current.not_done = nullptr;
    }
  }
  if (done) {
    state_->call_thread.join();
    state_->watchdog.join();
    return true;
  }
  const std::string reason = plugin_ + " is stopping";
  if (current_not_done) current_not_done(reason + "; the call in progress is abandoned");
  for (auto& call : left) {
    if (call.not_done) call.not_done(reason + "; " + call.info.text() + " was not made");
  }
  state_->call_thread.detach();
  // The watchdog ends by itself: at the deadline of the call it watches, or it has already.
  state_->watchdog.detach();
  return false;
}

}  // namespace dockhand::agent
