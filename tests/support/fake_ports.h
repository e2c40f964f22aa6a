// Hand-written fakes of the agent core's ports (core/ports.h), shared by the unit tests of the
// Backend and of the flows it runs: a link that records frames and holds asks until the test
// answers them, an executor that records calls, timers on a clock the test moves, and a
// decommissioner whose passes end when the test says so.
//
// Threading and lifetime: single-threaded, like the core thread they stand in for. Nothing
// runs by itself: an ask's callback runs when the test calls it (takeAsk(...).done(...)), a
// timer when the test advances the clock, a pass's result when the test finishes it. Callbacks
// handed to a fake may capture the object under test, so a fake must outlive it (declare the
// fakes before it in a harness). Header-only.
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "core/ports.h"
#include "dockhand/protocol/envelope.h"
#include "dockhand/protocol/messages.h"

namespace dockhand::agent::fakes {

struct PendingAsk {
  protocol::Envelope message;
  Millis timeout{0};
  AskCallback done;
};

class FakeLink : public DriverLink {
 public:
  void connect() override { ++connect_calls; }
  bool connected() const override { return is_connected; }
  bool send(const protocol::Envelope& message) override {
    attempted.push_back(message);
    if (!is_connected || !send_ok) return false;
    sent.push_back(message);
    return true;
  }
  void ask(protocol::Envelope message, Millis timeout, AskCallback done) override {
    attempted.push_back(message);
    asks.push_back(PendingAsk{std::move(message), timeout, std::move(done)});
  }
  void close() override {
    ++close_calls;
    is_connected = false;
  }
  void flush() override {
    ++flush_calls;
    if (on_flush) on_flush();
  }

  std::vector<protocol::Envelope> sentOfType(std::string_view type) const {
    std::vector<protocol::Envelope> out;
    for (const auto& frame : sent) {
      if (frame.type == type) out.push_back(frame);
    }
    return out;
  }
  std::size_t attemptedOfType(std::string_view type) const {
    return static_cast<std::size_t>(std::count_if(attempted.begin(), attempted.end(),
                                                  [&](const auto& f) { return f.type == type; }));
  }
  // Removes the oldest pending ask, which must be of `type`.
  PendingAsk takeAsk(std::string_view type) {
    if (asks.empty()) {
      ADD_FAILURE() << "expected a pending " << type << " ask, found none";
      return PendingAsk{protocol::Envelope{}, Millis(0), [](const AskResult&) {}};
    }
    PendingAsk ask = std::move(asks.front());
    asks.pop_front();
    EXPECT_EQ(ask.message.type, type);
    return ask;
  }
  // Every frame handed to the link, as it would go on the wire.
  std::string wireText() const {
    std::string text;
    for (const auto& frame : attempted) text += protocol::encodeEnvelope(frame) + "\n";
    return text;
  }

  int connect_calls = 0;
  int close_calls = 0;
  int flush_calls = 0;
  std::function<void()> on_flush;  // runs at each flush(), to see what was done by then
  bool is_connected = false;
  bool send_ok = true;
  std::vector<protocol::Envelope> sent;       // frames that reached the driver
  std::vector<protocol::Envelope> attempted;  // every frame handed to the link, sent or not
  std::deque<PendingAsk> asks;
};

struct KillCall {
  std::uint64_t task_id = 0;
  bool interrupt = false;
  std::string reason;
};

class FakeExecutor : public Executor {
 public:
  Result<void> launch(const protocol::TaskDescription& task) override {
    launched.push_back(task);
    if (auto it = launch_errors.find(task.task_id); it != launch_errors.end()) {
      return Error(it->second);
    }
    return {};
  }
  bool kill(std::uint64_t task_id, bool interrupt, const std::string& reason) override {
    kills.push_back(KillCall{task_id, interrupt, reason});
    return true;
  }
  std::optional<Json> threadDump(std::uint64_t task_id) override {
    auto it = dumps.find(task_id);
    if (it == dumps.end()) return std::nullopt;
    return it->second;
  }
  void stopAll(Millis grace) override {
    stop_all_calls.push_back(grace);
    if (on_stop_all) on_stop_all();  // e.g. the runners' reports of the tasks it stopped
  }
  // Hands over the tasks named in `hand_over`, with a handle naming the task.
  std::vector<HandedOverTask> handOver() override {
    ++hand_over_calls;
    std::vector<HandedOverTask> out;
    for (const auto task_id : hand_over) {
      out.push_back(HandedOverTask{task_id, "process", Json{{"task", task_id}}, 0, {}});
    }
    return out;
  }

  std::size_t launchCount(std::uint64_t task_id) const {
    return static_cast<std::size_t>(
        std::count_if(launched.begin(), launched.end(),
                      [&](const protocol::TaskDescription& t) { return t.task_id == task_id; }));
  }

  std::vector<protocol::TaskDescription> launched;
  std::map<std::uint64_t, std::string> launch_errors;
  std::vector<KillCall> kills;
  std::map<std::uint64_t, Json> dumps;
  std::vector<Millis> stop_all_calls;
  std::function<void()> on_stop_all;
  std::vector<std::uint64_t> hand_over;
  int hand_over_calls = 0;
};

// A manual clock: nothing happens until the test calls advance().
class FakeTimers : public Timers {
 public:
  TimePoint now() const override { return now_; }
  TimerId schedule(Millis delay, std::function<void()> fn) override {
    TimerId id = ++last_id_;
    delays.push_back(delay);
    timers_.push_back(Pending{now_ + delay, id, std::move(fn)});
    return id;
  }
  void cancel(TimerId id) override {
    timers_.erase(std::remove_if(timers_.begin(), timers_.end(),
                                 [id](const Pending& p) { return p.id == id; }),
                  timers_.end());
  }
  // Moves the clock forward by `delta`, running every timer that falls due on the way in order
  // of due time (then of scheduling), including timers scheduled by those timers.
  void advance(Millis delta) {
    const TimePoint target = now_ + delta;
    for (;;) {
      auto next =
          std::min_element(timers_.begin(), timers_.end(), [](const Pending& a, const Pending& b) {
            return std::tie(a.due, a.id) < std::tie(b.due, b.id);
          });
      if (next == timers_.end() || next->due > target) break;
      now_ = next->due;
      std::function<void()> fn = std::move(next->fn);
      timers_.erase(next);
      fn();
    }
    now_ = target;
  }
  std::size_t pending() const { return timers_.size(); }

  std::vector<Millis> delays;  // of every schedule() call, in order

 private:
  struct Pending {
    TimePoint due;
    TimerId id = 0;
    std::function<void()> fn;
  };
  TimePoint now_ = TimePoint(std::chrono::hours(24));
  TimerId last_id_ = 0;
  std::vector<Pending> timers_;
};

class FakeLogControl : public LogControl {
 public:
  bool setLevel(std::string_view level) override {
    levels.emplace_back(level);
    static const std::set<std::string, std::less<>> kKnown = {"trace", "debug", "info",
                                                              "warn",  "error", "off"};
    return kKnown.find(level) != kKnown.end();
  }
  std::vector<std::string> levels;
};

class FakeExiter : public Exiter {
 public:
  void exit(int code) override { codes.push_back(code); }
  std::vector<int> codes;
};

// Records what it is asked to do; passes end when the test says so.
// A pass that moved every block of `moved` and left nothing behind.
inline MigrationPassResult completePass(std::vector<protocol::BlockInfo> moved = {}) {
  MigrationPassResult result;
  for (const auto& b : moved) result.bytes_moved += b.size;
  result.moved = std::move(moved);
  result.complete = true;
  return result;
}

class FakeDecommissioner : public Decommissioner {
 public:
  struct Pass {
    std::vector<protocol::Peer> peers;
    std::function<void(MigrationPassProgress)> progress;
    std::function<void(MigrationPassResult)> done;
  };
  bool migrationEnabled() const override { return migration_enabled; }
  void begin() override { ++begins; }
  void startPass(std::vector<protocol::Peer> peers,
                 std::function<void(MigrationPassProgress)> progress,
                 std::function<void(MigrationPassResult)> done) override {
    passes.push_back(Pass{std::move(peers), std::move(progress), std::move(done)});
  }
  void release(const std::vector<std::string>& ids) override {
    released.insert(released.end(), ids.begin(), ids.end());
  }
  std::vector<std::string> blocksLeft() const override { return left; }
  void cancel() override { ++cancels; }

  // Ends the oldest running pass with `result`.
  void finishPass(MigrationPassResult result) {
    if (passes.empty()) {
      ADD_FAILURE() << "no migration pass is running";
      return;
    }
    Pass pass = std::move(passes.front());
    passes.pop_front();
    pass.done(std::move(result));
  }

  bool migration_enabled = true;
  int begins = 0;
  int cancels = 0;
  std::deque<Pass> passes;
  std::vector<std::string> released;
  std::vector<std::string> left;
};

// A successful answer to an ask, with the driver's reply body.
inline AskResult okResult(Json body) {
  AskResult result;
  result.ok = true;
  result.body = std::move(body);
  return result;
}

// A failed ask: the driver's refusal, or a timeout/disconnect (protocol::error_code).
inline AskResult errorResult(std::string_view code, std::string message) {
  AskResult result;
  result.ok = false;
  result.error = protocol::ErrorInfo{std::string(code), std::move(message)};
  return result;
}

}  // namespace dockhand::agent::fakes
