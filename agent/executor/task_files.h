// What the executor writes into and reads from a task's directory, apart from running it: the
// task JSON a runner gets (with the DOCKHAND_* environment), the files a finished task left in
// output/, which become blocks, and an ended task's directory made ready for another task.
// Pure functions of their arguments (and the store); PluginExecutor calls them on the core
// thread (the JSON) and on an I/O thread (the outputs, the reuse).
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "blocks/block_store.h"
#include "dockhand/base/result.h"
#include "dockhand/protocol/messages.h"

namespace dockhand::agent {

// Whether task_json carries "env" (DH_RUNNER_NO_TASK_ENV: a runner that does not read it).
enum class TaskEnv { kIncluded, kLeftOut };

// The task_json a runner's launch() gets for `task`, whose directory is `task_dir`, as the
// text passed to it.
std::string runnerTaskJson(const protocol::TaskDescription& task,
                           const std::filesystem::path& task_dir, const std::string& executor_id,
                           TaskEnv env = TaskEnv::kIncluded);

// Turns the files a task left in `output_dir` into blocks of `store`, appending each to
// `blocks`. Every name is checked before any file is taken, so that a task with one bad name
// leaves no half-taken outputs. Fails saying why the outputs cannot be taken.
Result<void> ingestOutputs(BlockStore& store, const std::filesystem::path& output_dir,
                           const std::string& block_url, const std::string& executor_id,
                           std::vector<protocol::BlockInfo>& blocks);

// What an ended task left in its directory `dir`, seen in one look that writes nothing.
enum class LeftInDir {
  kNoDirectory,  // there is none (a runner that makes task directories made none)
  kNothing,      // exactly what clearForReuse leaves: ready for another task as it is
  kSomething,    // anything else: a file, a block, a log line, a changed mode, an error
};
// kNothing is: `dir` of mode 0700 and the agent's; input/ and output/ empty, 0755, the
// agent's; stdout and stderr, where there, as clearForReuse keeps them; nothing else. Links are
// not followed.
LeftInDir lookAtEndedDir(const std::filesystem::path& dir);

// False when `dir` is missing or empty; true when it has an entry, or cannot be read (whoever
// lists it next says why). Stops at the first entry.
bool mayHoldEntries(const std::filesystem::path& dir);

// Empties an ended task's directory `dir` for another task, keeping its inodes: `dir`,
// `input/` and `output/` (emptied) and `stdout`/`stderr` when they are empty regular files of
// one link, the agent's, that it may write; anything else in it goes, and a missing `input/` or
// `output/` is made again. The modes are those of a new task directory (0700; the two
// subdirectories 0755). Fails saying why it cannot; a `dir` that is not a directory (a link,
// say) is refused untouched. Reusing a directory instead of removing it and making a new one saves
// the file system five inode allocations and frees per task.
Result<void> clearForReuse(const std::filesystem::path& dir);

}  // namespace dockhand::agent
