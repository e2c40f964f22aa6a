#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace dockhand::agent {

// The URL pattern of a task's log stream ("http://host:7337/v1/tasks/{task_id}/logs/{stream}"),
// split once into its text and placeholders: a StatusUpdate's log_urls are then built by
// appending the pieces, not by scanning the pattern again for every update.
class TaskLogUrlPattern {
 public:
  TaskLogUrlPattern() = default;
  // Every "{task_id}" and "{stream}" is a placeholder; anything else (other braces included)
  // is copied as it is.
  explicit TaskLogUrlPattern(std::string_view pattern);

  // True when there is no pattern (the agent serves no task logs).
  bool empty() const { return pieces_.empty(); }

  // The pattern with `task_id` (decimal) and `stream` put in its placeholders.
  std::string expand(std::uint64_t task_id, std::string_view stream) const;

 private:
  enum class Part { kText, kTaskId, kStream };
  struct Piece {
    Part part = Part::kText;
    std::string text;  // kText only
  };

  std::vector<Piece> pieces_;
  std::size_t text_size_ = 0;  // all text pieces together
  std::size_t task_ids_ = 0;   // "{task_id}" placeholders
  std::size_t streams_ = 0;    // "{stream}" placeholders
};

}  // namespace dockhand::agent
