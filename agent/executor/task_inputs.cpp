// PluginExecutor's task inputs (see plugin_executor.h): a launched task's input blocks fetched
// into its input/ directory on an I/O thread, verified and measured, before its runner gets
// the task; a failed fetch ends the task FAILED naming the block (fetch_failed), a kill during
// the fetch KILLED.
#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <system_error>

#include <spdlog/spdlog.h>

#include "blocks/block_fetcher.h"
#include "blocks/block_id.h"
#include "dockhand/base/log_format.h"
#include "dockhand/base/logging.h"
#include "executor/plugin_executor.h"

namespace dockhand::agent {
namespace {

std::shared_ptr<spdlog::logger> inputLog() { return logger("executor"); }

// How long an input fetch that failed for a reason that may pass (the serving agent restarting
// in place, a connection reset) is tried again before the task fails with fetch_failed.
constexpr std::chrono::milliseconds kFetchRetryWindow{15000};

}  // namespace

void PluginExecutor::startFetch(const protocol::TaskDescription& task, Runner* runner,
                                std::string task_json, const std::filesystem::path& input_dir) {
  auto fetch = std::make_shared<Fetch>();
  fetch->runner = runner;
  fetch->task_json = std::move(task_json);
  registry_->fetching[task.task_id] = fetch;
  inputLog()->debug("task {}: fetching {} input block(s)", task.task_id, task.inputs.size());
  io_->submit([events = &events_, registry = registry_, live = live_, fetch, inputs = task.inputs,
               input_dir, task_id = task.task_id, signer = signer_, tls = tls_,
               stuck_reason = [this, runner] { return stuckReason(*runner); }] {
    const TaskLogScope io_context(task_id);
    std::string error;
    std::optional<protocol::FetchFailure> fetch_failed;
    const auto fetch_start = std::chrono::steady_clock::now();
    protocol::TaskMetrics fetched;
    std::uint64_t blocks = 0;
    std::uint64_t bytes = 0;
    for (const auto& input : inputs) {
      if (fetch->cancelled) break;
      if (!isValidBlockId(input.id)) {
        error = "input block id '" + input.id + "' is invalid (" + std::string(kBlockIdForms) + ")";
        break;
      }
      try {
        fetchBlockRetrying(input, input_dir / input.id, fetch->cancelled, kFetchTimeout,
                           kFetchRetryWindow, signer, tls);
        std::error_code size_error;
        const auto size = std::filesystem::file_size(input_dir / input.id, size_error);
        ++blocks;
        bytes += size_error ? input.size : size;
      } catch (const FetchError& e) {
        error = std::string("cannot fetch input ") + e.what();
        // Not when a kill cut the fetch short: the block itself may be fine.
        if (!fetch->cancelled)
          fetch_failed = protocol::FetchFailure{.block_id = input.id, .url = input.url};
        break;
      }
    }
    fetched.input_blocks = blocks;
    fetched.input_bytes = bytes;
    fetched.input_fetch_ms =
        static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                       std::chrono::steady_clock::now() - fetch_start)
                                       .count());
    const bool failed = fetch->cancelled || !error.empty();
    if (failed) {
      // Off the live set here, so that stopAll() on the core thread need not wait for this.
      {
        std::lock_guard lock(live->mutex);
        live->tasks.erase(task_id);
      }
      live->ended.notify_all();
    }
    events->post([events, registry, live, fetch, task_id, error, fetch_failed, failed, stuck_reason,
                  fetched = std::move(fetched)] {
      const TaskLogScope core_context(task_id);
      auto it = registry->fetching.find(task_id);
      if (it == registry->fetching.end() || it->second != fetch) return;  // stopped meanwhile
      registry->fetching.erase(it);
      TaskStatusEvent event;
      event.task_id = task_id;
      if (!failed) {
        if (submitLaunch(*events, registry, live, fetch->runner, task_id,
                         std::move(fetch->task_json))) {
          registry->input_metrics[task_id] = fetched;
          return;
        }
        {
          std::lock_guard lock(live->mutex);
          live->tasks.erase(task_id);
        }
        live->ended.notify_all();
        event.state = protocol::TaskState::kFailed;
        event.reason = stuck_reason();
      } else if (fetch->cancelled) {
        event.state = protocol::TaskState::kKilled;
        event.reason = fetch->kill_reason;
      } else {
        event.state = protocol::TaskState::kFailed;
        event.reason = error;
        event.fetch_failed = fetch_failed;
        event.metrics = fetched;
      }
      registry->retire_dir(task_id);  // no runner ever had the task
      registry->statuses->onTaskStatus(event);
    });
  });
}

}  // namespace dockhand::agent
