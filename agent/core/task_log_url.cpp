#include "core/task_log_url.h"

#include <charconv>
#include <utility>

namespace dockhand::agent {
namespace {

constexpr std::string_view kTaskIdPlaceholder = "{task_id}";
constexpr std::string_view kStreamPlaceholder = "{stream}";

}  // namespace

TaskLogUrlPattern::TaskLogUrlPattern(std::string_view pattern) {
  std::string text;
  const auto end_text = [&] {
    if (text.empty()) return;
    text_size_ += text.size();
    pieces_.push_back(Piece{Part::kText, std::move(text)});
    text.clear();
  };
  for (std::size_t i = 0; i < pattern.size();) {
    const std::string_view rest = pattern.substr(i);
    if (rest.starts_with(kTaskIdPlaceholder)) {
      end_text();
      pieces_.push_back(Piece{Part::kTaskId, {}});
      ++task_ids_;
      i += kTaskIdPlaceholder.size();
    } else if (rest.starts_with(kStreamPlaceholder)) {
      end_text();
      pieces_.push_back(Piece{Part::kStream, {}});
      ++streams_;
      i += kStreamPlaceholder.size();
    } else {
      text += pattern[i++];
    }
  }
  end_text();
}

std::string TaskLogUrlPattern::expand(std::uint64_t task_id, std::string_view stream) const {
  char digits[20];  // the most a 64-bit unsigned takes in decimal
  const auto converted = std::to_chars(digits, digits + sizeof digits, task_id);
  const std::string_view id(digits, static_cast<std::size_t>(converted.ptr - digits));
  std::string out;
  out.reserve(text_size_ + task_ids_ * id.size() + streams_ * stream.size());
  for (const Piece& piece : pieces_) {
    switch (piece.part) {
      case Part::kText:
        out += piece.text;
        break;
      case Part::kTaskId:
        out += id;
        break;
      case Part::kStream:
        out += stream;
        break;
    }
  }
  return out;
}

}  // namespace dockhand::agent
