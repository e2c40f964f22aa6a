// DriverService: task results stored as blocks. A library task whose result is too large for
// its status update finishes with {"block": "task_<id>_result", "bytes": N, ...}; the block is
// fetched from the agent that reported it (off the connection's thread) and the update goes
// on to the scheduler with the bytes as the result's "value" (or "value_base64"). A block that
// cannot be had fails the attempt, which is retried like any other failure.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "dockhand/base/log_format.h"
#include "dockhand/base/logging.h"
#include "dockhand/driver/driver_service.h"
#include "dockhand/protocol/result_value.h"

namespace dockhand::driver {

bool DriverService::fetchResultBlock(const std::string& agent_id,
                                     const protocol::StatusUpdate& update) {
  const Json& named = update.result.at("block");  // the caller checked it is there
  std::string error;
  ResultBlock block;
  {
    std::lock_guard lock(mutex_);
    scheduler_.touch(agent_id, now_());
    // An update the scheduler would ignore is not worth a fetch.
    if (!scheduler_.isRunningOn(update.task_id, agent_id)) return false;
    const BlockLocation* location =
        named.is_string() ? scheduler_.blocks().find(named.get<std::string>()) : nullptr;
    auto holder = location != nullptr ? location->holders.find(agent_id)
                                      : std::map<std::string, std::string>::const_iterator();
    if (!named.is_string() || !isValidBlockId(named.get<std::string>())) {
      error = fmt::format("its result names block {}, not a block id", named.dump());
    } else if (location == nullptr || holder == location->holders.end()) {
      error = fmt::format(
          "its result is block '{}', which agent '{}' did not report (UpdateBlockInfo) before "
          "FINISHED",
          named.get<std::string>(), agent_id);
    } else {
      block.id = location->id;
      block.url = holder->second;
      block.size = location->size;
      block.checksum = location->checksum;
      const AgentInfo* agent = scheduler_.agent(agent_id);
      if (block.url.rfind("http", 0) != 0 && agent != nullptr && !agent->block_url.empty()) {
        block.url = agent->block_url + "/blocks/" + block.id;
      }
    }
  }
  if (!error.empty()) {
    resultFetched(agent_id, update, Error(error));
    return true;
  }
  const TaskLogScope scope(update.task_id, agent_id);
  logger("driver")->debug("task {} on '{}': fetching its result, block {} ({} bytes) from {}",
                          update.task_id, agent_id, block.id, block.size, block.url);
  result_fetcher_.fetch(std::move(block),
                        [this, agent_id, update](const Result<std::string>& bytes) {
                          resultFetched(agent_id, update, bytes);
                        });
  return true;
}

void DriverService::resultFetched(const std::string& agent_id, protocol::StatusUpdate update,
                                  const Result<std::string>& bytes) {
  const TaskLogScope scope(update.task_id, agent_id);
  if (bytes) {
    protocol::putResultValue(update.result, *bytes);
    {
      // The fetcher removed the block on the agent once it had the bytes.
      std::lock_guard lock(mutex_);
      scheduler_.forgetBlock(update.result.at("block").get<std::string>(), agent_id);
    }
  } else {
    const std::string& why = bytes.error().message;
    logger("driver")->warn("task {} on '{}' finished, but its result cannot be had: {}",
                           update.task_id, agent_id, why);
    update.state = protocol::TaskState::kFailed;
    update.reason = "the task finished, but the driver could not get its result: " + why;
  }
  applyStatus(agent_id, std::move(update));
}

void DriverService::applyStatus(const std::string& agent_id, protocol::StatusUpdate update) {
  std::lock_guard lock(mutex_);
  const TimePoint now = now_();
  scheduler_.touch(agent_id, now);
  const JobState before = scheduler_.jobState();
  Actions actions;
  std::optional<std::size_t> logged;  // the task's index, when its end goes to the event log
  if (scheduler_.isRunningOn(update.task_id, agent_id)) {
    metrics_.taskStatus(update.state);
    if (event_log_ && protocol::isTerminal(update.state)) {
      logged = scheduler_.runningIndex(update.task_id);
    }
  }
  const std::uint64_t task_id = update.task_id;
  const protocol::TaskState state = update.state;
  scheduler_.onStatusUpdate(agent_id, std::move(update), now, actions);
  if (logged) {
    event_log_->taskEnded(scheduler_.job().name, *logged, scheduler_.tasks()[*logged], task_id,
                          state, agent_id);
  }
  apply(actions);
  // Once the job is over, an update may be the answer to a kill waitForKills waits for.
  if (scheduler_.jobState() != before || before != JobState::kRunning) changed_.notify_all();
}

}  // namespace dockhand::driver
