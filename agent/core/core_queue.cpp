#include "core/core_queue.h"

#include <algorithm>
#include <utility>

namespace dockhand::agent {

void CoreQueue::push(protocol::TaskDescription task, TimePoint received) {
  waiting_.push_back(Waiting{std::move(task), received});
}

bool CoreQueue::contains(std::uint64_t task_id) const {
  return std::any_of(waiting_.begin(), waiting_.end(),
                     [&](const Waiting& w) { return w.task.task_id == task_id; });
}

std::optional<CoreQueue::Waiting> CoreQueue::take(std::uint64_t task_id) {
  auto it = std::find_if(waiting_.begin(), waiting_.end(),
                         [&](const Waiting& w) { return w.task.task_id == task_id; });
  if (it == waiting_.end()) return std::nullopt;
  Waiting taken = std::move(*it);
  waiting_.erase(it);
  return taken;
}

std::optional<CoreQueue::Waiting> CoreQueue::takeNextThatFits(int in_use) {
  if (waiting_.empty() || !fits(waiting_.front().task.cpus, in_use)) return std::nullopt;
  Waiting next = std::move(waiting_.front());
  waiting_.pop_front();
  return next;
}

std::deque<CoreQueue::Waiting> CoreQueue::takeAll() {
  std::deque<Waiting> all;
  all.swap(waiting_);
  return all;
}

void CoreQueue::appendIds(std::vector<std::uint64_t>& ids) const {
  for (const auto& w : waiting_) ids.push_back(w.task.task_id);
}

}  // namespace dockhand::agent
