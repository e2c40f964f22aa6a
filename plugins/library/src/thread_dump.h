// The library runner's thread dump (plugin.h, thread_dump), written once for both modes:
//   {"task_id": N, "threads": [{"function", "library", "stack": [frames...], and "tid",
//    "pid", "state" or "error" as each mode knows them}]}
// On threads the runner samples the task's thread itself (library_runner.cpp); in worker mode
// the worker samples it (worker_main.cpp) and the pool puts the worker's answer in the dump
// (worker_pool.cpp).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "dockhand/base/result.h"

namespace dockhand::plugins::library {

// The task's thread in the dump, before its stack is known (an empty "stack").
nlohmann::json dumpThread(const std::string& function, const std::string& library);

// What a stack sample gave, put into `into`: the frames under "stack", or under "error" why
// there are none: the sampler's error, or `moved_on` when the task no longer ran on that thread
// by the time the sample returned (`still_running` false).
void putStack(nlohmann::json& into, const Result<std::vector<std::string>>& frames,
              bool still_running, const std::string& moved_on);

// The dump's text (invalid UTF-8 in a frame replaced, never an exception).
std::string dumpText(std::uint64_t task_id, const nlohmann::json& thread);

}  // namespace dockhand::plugins::library
