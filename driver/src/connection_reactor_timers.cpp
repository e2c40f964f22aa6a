// ConnectionReactor's deadlines: one timer entry per connection, re-armed lazily (see
// connection_reactor.h).
#include <chrono>
#include <string>

#include <fmt/format.h>

#include "dockhand/base/logging.h"
#include "dockhand/protocol/messages.h"

#include "connection_reactor.h"
#include "connection_reactor_slot.h"

namespace dockhand::driver {

// ---- timers -----------------------------------------------------------------------------------

void ConnectionReactor::arm(Slot& s, Clock::time_point at) {
  if (at >= s.armed) return;  // an earlier entry comes first and re-arms
  s.armed = at;
  timers_.emplace(at, s.connection->id());
}

int ConnectionReactor::waitMs(Clock::time_point now) const {
  if (!dirty_.empty() || !backlog_.empty()) return 0;
  if (timers_.empty()) return -1;
  const auto left = timers_.top().first - now;
  if (left <= Clock::duration::zero()) return 0;
  // Rounded up, so that the loop does not wake just before the deadline and spin.
  return static_cast<int>(std::chrono::ceil<std::chrono::milliseconds>(left).count());
}

void ConnectionReactor::fireTimers(Clock::time_point now) {
  while (!timers_.empty() && timers_.top().first <= now) {
    const auto [at, id] = timers_.top();
    timers_.pop();
    auto it = slots_.find(id);
    if (it == slots_.end() || it->second->ended || it->second->armed != at) continue;
    Slot& s = *it->second;
    s.armed = Clock::time_point::max();
    onDeadline(s, now);
  }
}

// A connection's timer came due: see which of its deadlines passed, and arm the next.
void ConnectionReactor::onDeadline(Slot& s, Clock::time_point now) {
  Connection& c = *s.connection;
  if (s.phase == Slot::Phase::kDraining) {
    if (now >= s.drain_until) {
      end(s, s.why);
      return;
    }
    arm(s, s.drain_until);
    return;
  }
  if (s.out_begin < s.out.size()) {
    if (now >= s.last_written + kWriteStallLimit) {
      const std::string why =
          fmt::format("the agent read nothing for {} s", kWriteStallLimit.count());
      logger("driver")->warn("connection {} ({}): {}; dropping it", c.id(), c.peer(), why);
      handler_.onDropped(s.connection, DropReason::kStoppedReading);
      end(s, why);
      return;
    }
    arm(s, s.last_written + kWriteStallLimit);
  }
  if (s.discard_input) return;  // closing: the drain deadline governs
  const auto timeout =
      std::chrono::milliseconds(c.greeted() ? options_.idle_timeout_ms : options_.hello_timeout_ms);
  if (now < s.last_read + timeout) {
    arm(s, s.last_read + timeout);
    return;
  }
  if (!c.greeted()) {
    handler_.onDropped(s.connection, DropReason::kNoHello);
    c.send(protocol::makeError(protocol::error_code::kTimeout,
                               fmt::format("no Hello within {} ms", options_.hello_timeout_ms)));
    c.close("no Hello in time");
    closeAfterRead(s, "no Hello in time");
    return;
  }
  bool keep = false;
  try {
    keep = handler_.onIdle(s.connection);
  } catch (const std::exception& e) {
    logger("driver")->error("connection {} ({}): idle handler failed: {}", c.id(), c.peer(),
                            e.what());
  }
  if (!keep) {
    c.close("idle");
    closeAfterRead(s, "idle");
    return;
  }
  s.last_read = now;  // another idle period
  arm(s, now + timeout);
}

}  // namespace dockhand::driver
