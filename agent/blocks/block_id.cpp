#include "blocks/block_id.h"

#include <vector>

namespace dockhand::agent {
namespace {

constexpr std::size_t kMaxIdLength = 255;
constexpr std::size_t kMaxNumberDigits = 19;
constexpr std::size_t kMaxTaskNameLength = 200;

bool isNumber(std::string_view text) {
  if (text.empty() || text.size() > kMaxNumberDigits) return false;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

bool isNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '-';
}

// Splits `text` at every '_' (empty parts kept).
std::vector<std::string_view> splitUnderscore(std::string_view text) {
  std::vector<std::string_view> parts;
  std::size_t start = 0;
  for (;;) {
    std::size_t pos = text.find('_', start);
    if (pos == std::string_view::npos) {
      parts.push_back(text.substr(start));
      return parts;
    }
    parts.push_back(text.substr(start, pos - start));
    start = pos + 1;
  }
}

}  // namespace

std::optional<BlockKind> parseBlockId(std::string_view id) {
  if (id.empty() || id.size() > kMaxIdLength) return std::nullopt;
  if (id.starts_with("shuffle_")) {
    auto parts = splitUnderscore(id.substr(8));
    if (parts.size() == 3 && isNumber(parts[0]) && isNumber(parts[1]) && isNumber(parts[2])) {
      return BlockKind::kShuffle;
    }
    return std::nullopt;
  }
  if (id.starts_with("rdd_")) {
    auto parts = splitUnderscore(id.substr(4));
    if (parts.size() == 2 && isNumber(parts[0]) && isNumber(parts[1])) return BlockKind::kRdd;
    return std::nullopt;
  }
  if (id.starts_with("task_")) {
    std::string_view rest = id.substr(5);
    std::size_t sep = rest.find('_');
    if (sep == std::string_view::npos || !isNumber(rest.substr(0, sep))) return std::nullopt;
    std::string_view name = rest.substr(sep + 1);
    if (name.empty() || name.size() > kMaxTaskNameLength || name.front() == '.') {
      return std::nullopt;
    }
    for (char c : name) {
      if (!isNameChar(c)) return std::nullopt;
    }
    return BlockKind::kTask;
  }
  return std::nullopt;
}

std::string_view toString(BlockKind kind) {
  switch (kind) {
    case BlockKind::kShuffle:
      return "shuffle";
    case BlockKind::kRdd:
      return "rdd";
    case BlockKind::kTask:
      return "task";
  }
  return "unknown";
}

}  // namespace dockhand::agent
