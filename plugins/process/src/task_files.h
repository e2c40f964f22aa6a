// A task's directory and files as the runner handles them: checks before a launch, handing the
// work directory to the task's user and back (when tasks run as another user), and reading
// the task's stdout/stderr files for its report. Called on the runner's call thread (launch)
// and the reaper thread (report); no state of their own.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>

namespace dockhand::plugins::process {

bool isDirectory(const std::string& path);

// Gives `dir` and everything under it to uid:gid without following symbolic links. With
// `only_from`, only what that uid owns changes hands (taking a task's files back must not
// touch files it does not own, e.g. hard links to other files). Returns the first failure,
// "" when none.
std::string chownTree(const std::string& dir, uid_t uid, gid_t gid, std::optional<uid_t> only_from);

// Reads at most `limit` bytes of `path` from its start (or up to its end when tail is set).
// Returns the bytes and the file's total size; nothing and 0 when it cannot be read or is not
// a regular file (a symbolic link is never followed).
std::pair<std::string, std::uint64_t> readPart(const std::string& path, std::size_t limit,
                                               bool tail);

}  // namespace dockhand::plugins::process
