#include "executor/runner_calls.h"

#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <utility>

namespace dockhand::agent {

struct RunnerCalls::State {
  std::mutex mutex;
  std::condition_variable work;   // the call thread waits for calls
  std::condition_variable watch;  // the watchdog waits for a call to start, or its deadline
  std::condition_variable ended;  // stop() waits for the call thread to end
  std::deque<Call> queue;
  bool in_call = false;
  CallInfo current;
  std::chrono::steady_clock::time_point started;
  std::uint64_t calls_started = 0;
  bool watchdog_idle = false;
  bool stopping = false;
  bool stuck = false;
  bool call_thread_done = false;
  std::chrono::milliseconds timeout;
  StuckHandler on_stuck;
  std::thread call_thread;
  std::thread watchdog;
};

void RunnerCalls::runCalls(const std::shared_ptr<State>& s) {
  std::unique_lock lock(s->mutex);
  for (;;) {
    s->work.wait(lock, [&] { return s->stopping || !s->queue.empty(); });
    if (s->queue.empty()) break;  // stopping, and every queued call has run
    RunnerCalls::Call call = std::move(s->queue.front());
    s->queue.pop_front();
    s->in_call = true;
    s->current = {call.hook, call.task_id};
    s->started = std::chrono::steady_clock::now();
    ++s->calls_started;
    if (s->watchdog_idle) s->watch.notify_one();
    lock.unlock();
    call.run();
    call = RunnerCalls::Call{};  // what the call holds goes before the lock is taken
    lock.lock();
    s->in_call = false;
  }
  s->call_thread_done = true;
  s->ended.notify_all();
  s->watch.notify_one();
}

void RunnerCalls::watchCalls(const std::shared_ptr<State>& s) {
  std::unique_lock lock(s->mutex);
  while (!s->call_thread_done) {
    if (!s->in_call) {
      s->watchdog_idle = true;
      s->watch.wait(lock, [&] { return s->in_call || s->call_thread_done; });
      s->watchdog_idle = false;
      continue;
    }
    // The call thread does not wake the watchdog when a call ends (that would cost every
    // call a wake-up): it looks again at the deadline of the call it saw start.
    const std::uint64_t seen = s->calls_started;
    const auto deadline = s->started + s->timeout;
    s->watch.wait_until(lock, deadline, [&] { return s->call_thread_done; });
    if (s->call_thread_done) break;
    if (!s->in_call || s->calls_started != seen || std::chrono::steady_clock::now() < deadline) {
      continue;
    }
    s->stuck = true;
    const bool stopping = s->stopping;
    RunnerCalls::CallInfo overran = s->current;
    std::deque<RunnerCalls::Call> queued;
    queued.swap(s->queue);
    std::vector<RunnerCalls::CallInfo> dropped;
    dropped.reserve(queued.size());
    for (const auto& call : queued) dropped.push_back({call.hook, call.task_id});
    lock.unlock();
    queued.clear();
    // Once stop() has begun, nobody is told: the executor is going away.
    if (s->on_stuck && !stopping) s->on_stuck(std::move(overran), std::move(dropped));
    return;
  }
}

RunnerCalls::RunnerCalls(std::string name, std::chrono::milliseconds timeout, StuckHandler on_stuck)
    : name_(std::move(name)), timeout_(timeout), state_(std::make_shared<State>()) {
  state_->timeout = timeout;
  state_->on_stuck = std::move(on_stuck);
  state_->call_thread = std::thread([s = state_] { runCalls(s); });
  state_->watchdog = std::thread([s = state_] { watchCalls(s); });
}

RunnerCalls::~RunnerCalls() {
  if (!stopped_) stop(std::chrono::steady_clock::now() + timeout_);
}

bool RunnerCalls::submit(Call call) {
  {
    std::lock_guard lock(state_->mutex);
    if (state_->stuck || state_->stopping) return false;
    state_->queue.push_back(std::move(call));
  }
  state_->work.notify_one();
  return true;
}

bool RunnerCalls::stuck() const {
  std::lock_guard lock(state_->mutex);
  return state_->stuck;
}

std::string RunnerCalls::stuckCall() const {
  std::lock_guard lock(state_->mutex);
  if (!state_->stuck) return {};
  return state_->current.hook + "() of task " + std::to_string(state_->current.task_id);
}

bool RunnerCalls::stop(std::chrono::steady_clock::time_point deadline) {
  if (stopped_) {
    std::lock_guard lock(state_->mutex);
    return state_->call_thread_done;
  }
  stopped_ = true;
  bool done;
  {
    std::unique_lock lock(state_->mutex);
    state_->stopping = true;
    state_->work.notify_one();
    // Past the deadline only a thread in a call (or with calls still to make) is given up on;
    // one with nothing left to do is about to end.
    done = state_->ended.wait_until(lock, deadline, [&] { return state_->call_thread_done; }) ||
           (!state_->in_call && state_->queue.empty());
  }
  if (done) {
    state_->call_thread.join();
    state_->watchdog.join();
  } else {
    state_->call_thread.detach();
    // The watchdog ends by itself: at the deadline of the call it watches, or it has already.
    state_->watchdog.detach();
  }
  return done;
}

}  // namespace dockhand::agent
