// What the executor writes into and reads from a task's directory, apart from running it: the
// task JSON a runner gets (with the DOCKHAND_* environment), and the files a finished task
// left in output/, which become blocks. Pure functions of their arguments (and the store);
// PluginExecutor calls them on the core thread (the JSON) and on an I/O thread (the outputs).
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "blocks/block_store.h"
#include "dockhand/protocol/messages.h"

namespace dockhand::agent {

// The task_json a runner's launch() gets for `task`, whose directory is `task_dir`.
nlohmann::json runnerTaskJson(const protocol::TaskDescription& task,
                              const std::filesystem::path& task_dir,
                              const std::string& executor_id);

// Turns the files a task left in `output_dir` into blocks of `store`, appending each to
// `blocks`. Every name is checked before any file is taken, so that a task with one bad name
// leaves no half-taken outputs. Returns why the outputs cannot be taken, or nullopt.
std::optional<std::string> ingestOutputs(BlockStore& store, const std::filesystem::path& output_dir,
                                         const std::string& block_url,
                                         const std::string& executor_id,
                                         std::vector<protocol::BlockInfo>& blocks);

}  // namespace dockhand::agent
