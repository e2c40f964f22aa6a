// Block ids: the names of the immutable files a BlockStore holds.
//
//   shuffle_<shuffle>_<map>_<reduce>   a shuffle output       shuffle_0_3_1
//   rdd_<rdd>_<partition>              a cached partition     rdd_4_12
//   task_<task id>_<name>              a task's named output  task_17_summary.csv
//
// Numbers are 1 to 19 decimal digits. A task output's name is 1 to 200 characters of
// [A-Za-z0-9._-] and does not start with '.'. Nothing else is an id: an id never contains '/',
// is never "." or "..", and so can never name a file outside the store's directory.
#pragma once

#include <optional>
#include <string_view>

namespace dockhand::agent {

enum class BlockKind { kShuffle, kRdd, kTask };

// The kind of a valid id, or nullopt for anything that is not one.
std::optional<BlockKind> parseBlockId(std::string_view id);
inline bool isValidBlockId(std::string_view id) { return parseBlockId(id).has_value(); }

std::string_view toString(BlockKind kind);

// One line describing the accepted forms, for error messages.
inline constexpr std::string_view kBlockIdForms =
    "shuffle_<s>_<m>_<r>, rdd_<r>_<p> or task_<id>_<name>";

}  // namespace dockhand::agent
