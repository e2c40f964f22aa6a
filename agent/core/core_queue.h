// CoreQueue: the launched tasks that wait for cores, and the rule that says when a task starts
// (see "Cores" in backend.h). A task starts when nothing waits before it and its cpus fit
// beside the cores in use; with nothing running, any task starts, even one larger than the
// agent, so nothing waits forever. Waiting tasks start, are killed, or are ended together
// (decommission, exit) in arrival order.
//
// Pure bookkeeping on the core thread: the Backend says how many cores its running tasks hold,
// and starts, kills or reports what this hands back.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <vector>

#include "core/ports.h"
#include "dockhand/protocol/messages.h"

namespace dockhand::agent {

class CoreQueue {
 public:
  struct Waiting {
    protocol::TaskDescription task;
    TimePoint received{};  // when its LaunchTask arrived
  };

  explicit CoreQueue(int cores) : cores_(cores) {}

  // The registered cores.
  int cores() const { return cores_; }
  // A task of `cpus` that arrives while the running tasks hold `in_use` cores starts now:
  // nothing waits before it, and it fits.
  bool startsNow(int cpus, int in_use) const { return waiting_.empty() && fits(cpus, in_use); }
  // `task` waits behind the others.
  void push(protocol::TaskDescription task, TimePoint received);
  bool contains(std::uint64_t task_id) const;
  // Takes `task_id` out of the queue; nullopt when it does not wait here.
  std::optional<Waiting> take(std::uint64_t task_id);
  // Takes the first waiting task when it fits beside `in_use` cores; nullopt when none waits
  // or the first does not fit (those behind it wait too: arrival order is kept).
  std::optional<Waiting> takeNextThatFits(int in_use);
  // Empties the queue: every waiting task, in arrival order.
  std::deque<Waiting> takeAll();

  bool empty() const { return waiting_.empty(); }
  std::size_t size() const { return waiting_.size(); }
  // The waiting tasks' ids, in arrival order, appended to `ids`.
  void appendIds(std::vector<std::uint64_t>& ids) const;

 private:
  bool fits(int cpus, int in_use) const { return in_use <= 0 || in_use + cpus <= cores_; }

  int cores_;
  std::deque<Waiting> waiting_;
};

}  // namespace dockhand::agent
