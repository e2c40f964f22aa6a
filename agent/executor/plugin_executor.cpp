#include "executor/plugin_executor.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <optional>
#include <system_error>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "dockhand/base/log_format.h"
#include "dockhand/base/logging.h"

#include "executor/task_files.h"

namespace dockhand::agent {
namespace {

// The "executor" logger, sharing the default logger's sinks.
std::shared_ptr<spdlog::logger> log() { return logger("executor"); }

std::optional<protocol::TaskState> stateOf(std::int32_t state) {
  switch (state) {
    case DH_TASK_RUNNING:
      return protocol::TaskState::kRunning;
    case DH_TASK_FINISHED:
      return protocol::TaskState::kFinished;
    case DH_TASK_FAILED:
      return protocol::TaskState::kFailed;
    case DH_TASK_KILLED:
      return protocol::TaskState::kKilled;
    case DH_TASK_LOST:
      return protocol::TaskState::kLost;
    default:
      return std::nullopt;
  }
}

}  // namespace

std::optional<TaskStatusEvent> toTaskStatusEvent(std::uint64_t task_id, std::int32_t state,
                                                 std::string_view detail_json) {
  auto task_state = stateOf(state);
  if (!task_state) return std::nullopt;
  TaskStatusEvent event;
  event.task_id = task_id;
  event.state = *task_state;
  if (detail_json.empty()) return event;
  Json detail = Json::parse(detail_json, nullptr, /*allow_exceptions=*/false);
  if (!detail.is_object()) {
    event.reason = "the runner sent a malformed status detail";
    return event;
  }
  if (auto it = detail.find("result"); it != detail.end()) event.result = std::move(*it);
  if (auto it = detail.find("reason"); it != detail.end() && it->is_string()) {
    event.reason = it->get<std::string>();
  }
  if (auto it = detail.find("exit_code"); it != detail.end() && it->is_number_integer()) {
    event.exit_code = it->get<int>();
  }
  if (auto it = detail.find("signal"); it != detail.end() && it->is_number_integer()) {
    event.signal = it->get<int>();
  }
  if (auto it = detail.find("stderr_tail"); it != detail.end() && it->is_string()) {
    event.stderr_tail = it->get<std::string>();
  }
  if (auto it = detail.find("metrics"); it != detail.end()) {
    event.metrics = protocol::taskMetricsFromJson(*it, &event.dropped_metrics);
  }
  return event;
}

PluginExecutor::PluginExecutor(EventSink& events, TaskStatusSink& statuses,
                               PluginExecutorOptions options)
    : events_(events),
      work_dir_(std::move(options.work_dir)),
      executor_id_(std::move(options.executor_id)),
      registry_(std::make_shared<Registry>()),
      live_(std::make_shared<Live>()),
      keep_task_dirs_(options.keep_task_dirs),
      block_store_(options.store),
      block_url_(std::move(options.block_url)),
      signer_(std::move(options.signer)),
      tls_(std::move(options.tls)),
      io_(std::make_unique<IoPool>(2)) {
  registry_->statuses = &statuses;
  registry_->retire_dir = [this](std::uint64_t task_id) { retireTaskDir(task_id); };
}

TaskStatusCallback PluginExecutor::runnerReports() {
  return [this](std::uint64_t task_id, std::int32_t state, std::string_view detail_json) {
    onRunnerStatus(task_id, state, detail_json);
  };
}

void PluginExecutor::addRunner(const std::string& name, std::unique_ptr<TaskRunnerPlugin> plugin) {
  auto runner = std::make_unique<Runner>();
  runner->name = name;
  runner->plugin = std::move(plugin);
  runner->calls = &runner->plugin->instance().calls();
  runner->calls->onStuck(
      [events = &events_, registry = registry_, live = live_, name = name, calls = runner->calls](
          PluginCalls::CallInfo stuck, std::vector<PluginCalls::CallInfo> dropped) {
        // The watchdog's thread: the rest happens on the core thread.
        events->post([registry, live, name, what = calls->stuckCall(), stuck = std::move(stuck),
                      dropped = std::move(dropped)] {
          onRunnerStuck(*registry, *live, name, what, stuck, dropped);
        });
      });
  runners_.insert_or_assign(name, std::move(runner));
}

PluginExecutor::~PluginExecutor() {
  // A call in progress gets what is left of its own bound.
  Millis grace(0);
  for (const auto& [name, runner] : runners_) grace = std::max(grace, runner->calls->timeout());
  destroyRunners(SteadyClock::now() + grace);
}

std::vector<std::string> PluginExecutor::runnerNames() const {
  std::vector<std::string> names;
  for (const auto& [name, runner] : runners_) names.push_back(name);
  return names;
}

std::map<std::string, std::string> PluginExecutor::stuckRunners() const {
  std::map<std::string, std::string> stuck;
  for (const auto& [name, runner] : runners_) {
    std::string call = runner->calls->stuckCall();
    if (!call.empty()) stuck[name] = std::move(call);
  }
  return stuck;
}

std::string PluginExecutor::taskJson(const protocol::TaskDescription& task,
                                     const std::filesystem::path& task_dir,
                                     const Runner& runner) const {
  return runnerTaskJson(task, task_dir, executor_id_,
                        runner.plugin->readsTaskEnv() ? TaskEnv::kIncluded : TaskEnv::kLeftOut);
}

std::string PluginExecutor::stuckReason(const Runner& runner) const {
  std::string call = runner.calls->stuckCall();
  if (call.empty()) return "task runner '" + runner.name + "' is stopping";
  return "task runner '" + runner.name + "' is stuck: " + call +
         "; restart the agent to use it again";
}

Result<void> PluginExecutor::launch(const protocol::TaskDescription& task) {
  const TaskLogScope scope(task.task_id);
  auto runner_it = runners_.find(task.runner);
  if (runner_it == runners_.end()) {
    const auto names = runnerNames();
    return Error(fmt::format(
        "no task runner named '{}' (loaded runners: {})", task.runner,
        names.empty() ? std::string("none") : fmt::format("{}", fmt::join(names, ", "))));
  }
  Runner* runner = runner_it->second.get();
  if (runner->calls->stuck()) return Error(stuckReason(*runner));
  if (registry_->tasks.count(task.task_id) || registry_->fetching.count(task.task_id)) {
    return Error("task " + std::to_string(task.task_id) + " is already running");
  }
  std::filesystem::path task_dir = taskDir(task.task_id);
  {
    // A task id that ended here before (the protocol says a driver never sends one again): its
    // directory is not one that another launch may take from under it, and its logs are its own.
    std::lock_guard lock(live_->mutex);
    std::erase_if(live_->untouched, [&](const auto& entry) { return entry.first == task.task_id; });
    live_->no_dir.erase(task.task_id);
  }
  // A runner that makes a task's directory itself gets one from here only for inputs.
  const bool make_dir = !task.inputs.empty() || !runner->plugin->makesWorkDir();
  if (auto made = makeTasksDir(); !made) return made.error();
  if (!task.inputs.empty()) {
    // Here, for the inputs are fetched into it; other tasks' is made where they launch.
    if (auto made = makeTaskDir(*live_, task_dir); !made) return made.error();
  }
  std::string task_json = taskJson(task, task_dir, *runner);
  {
    // Before the call: the runner may report the task ended before launch() returns.
    std::lock_guard lock(live_->mutex);
    live_->tasks.insert(task.task_id);
  }
  if (!task.inputs.empty()) {
    startFetch(task, runner, std::move(task_json), task_dir / "input");
    return {};
  }
  std::optional<std::filesystem::path> dir_to_make;
  if (make_dir) dir_to_make = std::move(task_dir);
  if (!submitLaunch(events_, registry_, live_, runner, task.task_id, std::move(task_json),
                    std::move(dir_to_make))) {
    {
      std::lock_guard lock(live_->mutex);
      live_->tasks.erase(task.task_id);
    }
    live_->ended.notify_all();
    return Error(stuckReason(*runner));
  }
  return {};
}

bool PluginExecutor::submitLaunch(EventSink& events, const std::shared_ptr<Registry>& registry,
                                  const std::shared_ptr<Live>& live, Runner* runner,
                                  std::uint64_t task_id, std::string task_json,
                                  std::optional<std::filesystem::path> make_dir) {
  // Registered before the call runs: a kill queues behind the launch, and the runner's reports
  // find the task.
  registry->tasks[task_id] = runner;
  if (runner->plugin->canTryLaunch()) {
    if (make_dir) {
      if (!madeForLaunch(events, registry, live, task_id, *make_dir)) return true;
      make_dir.reset();
    }
    // Here when the runner starts the task at once: its call thread need not wake up.
    std::optional<PluginResult> here = runner->calls->callHere(
        {"try_launch", task_id}, [&] { return runner->plugin->tryLaunch(task_json); });
    if (here && here->status != DH_UNSUPPORTED) {
      if (!here->ok()) {
        launchRefused(events, registry, live, task_id, runner->plugin->name() + ": " + here->error);
      }
      return true;
    }
  }
  bool queued = runner->calls->submit(
      {{"launch", task_id},
       [events = &events, registry, live, runner, task_id, task_json = std::move(task_json),
        make_dir = std::move(make_dir)] {
         const TaskLogScope call_context(task_id);  // what the runner logs while it launches
         if (make_dir && !madeForLaunch(*events, registry, live, task_id, *make_dir)) return;
         PluginResult result = runner->plugin->launch(task_json);
         if (result.ok()) return;
         launchRefused(*events, registry, live, task_id,
                       runner->plugin->name() + ": " + result.error);
       }});
  if (!queued) registry->tasks.erase(task_id);
  return queued;
}

bool PluginExecutor::madeForLaunch(EventSink& events, const std::shared_ptr<Registry>& registry,
                                   const std::shared_ptr<Live>& live, std::uint64_t task_id,
                                   const std::filesystem::path& dir) {
  auto made = makeTaskDir(*live, dir);
  if (!made) launchRefused(events, registry, live, task_id, made.error().message);
  return made.ok();
}

void PluginExecutor::launchRefused(EventSink& events, const std::shared_ptr<Registry>& registry,
                                   const std::shared_ptr<Live>& live, std::uint64_t task_id,
                                   std::string reason) {
  events.post([registry, live, task_id, reason = std::move(reason)]() mutable {
    const TaskLogScope core_context(task_id);
    log()->warn("task {} could not start: {}", task_id, reason);
    // The runner refused it and has no use for its directory (unless it reported the task
    // anyway: then that report retires the directory).
    if (endTask(*registry, *live, task_id, protocol::TaskState::kFailed, std::move(reason))) {
      registry->retire_dir(task_id);
    }
  });
}

bool PluginExecutor::endTask(Registry& registry, Live& live, std::uint64_t task_id,
                             protocol::TaskState state, std::string reason) {
  if (registry.tasks.count(task_id) == 0) return false;  // it ended meanwhile, or never was here
  bool was_live;
  {
    std::lock_guard lock(live.mutex);
    was_live = live.tasks.erase(task_id) > 0;
  }
  // Not live: the runner reported it ended, and that status is on its way here.
  if (!was_live) return false;
  live.ended.notify_all();
  registry.tasks.erase(task_id);
  TaskStatusEvent event;
  event.metrics = takeInputMetrics(registry, task_id);
  event.task_id = task_id;
  event.state = state;
  event.reason = std::move(reason);
  registry.statuses->onTaskStatus(event);
  return true;
}

void PluginExecutor::onRunnerStuck(Registry& registry, Live& live, const std::string& name,
                                   const std::string& what, const PluginCalls::CallInfo& stuck,
                                   const std::vector<PluginCalls::CallInfo>& dropped) {
  log()->error(
      "task runner '{}' is stuck: {}; the call is abandoned, {} queued call(s) dropped, and "
      "later calls to it fail at once until the agent restarts",
      name, what, dropped.size());
  auto end = [&](const PluginCalls::CallInfo& call, const std::string& reason) {
    if (call.hook == "launch") {
      endTask(registry, live, call.task_id, protocol::TaskState::kFailed, reason);
    } else if (call.hook == "kill") {
      endTask(registry, live, call.task_id, protocol::TaskState::kLost,
              reason + "; the task could not be killed and its state is unknown");
    }
  };
  end(stuck, "task runner '" + name + "': " + what);
  for (const auto& call : dropped) {
    end(call, fmt::format("task runner '{}' is stuck ({}); {}() of this task was not made", name,
                          what, call.hook));
  }
}

bool PluginExecutor::kill(std::uint64_t task_id, bool interrupt, const std::string& reason) {
  const TaskLogScope scope(task_id);
  if (auto fetching = registry_->fetching.find(task_id); fetching != registry_->fetching.end()) {
    fetching->second->kill_reason = reason;
    fetching->second->cancelled = true;
    return true;
  }
  auto it = registry_->tasks.find(task_id);
  if (it == registry_->tasks.end()) return false;
  Runner* runner = it->second;
  bool queued =
      runner->calls->submit({{"kill", task_id}, [runner, task_id, interrupt, reason] {
                               const TaskLogScope call_context(task_id);
                               PluginResult result =
                                   runner->plugin->kill(task_id, interrupt, reason);
                               if (!result.ok() && result.status != DH_NOT_FOUND) {
                                 log()->warn("task {}: runner {} could not kill it: {}", task_id,
                                             runner->plugin->name(), result.error);
                               }
                               // DH_NOT_FOUND: it ended meanwhile; its terminal
                               // status is on its way to the core thread.
                             }});
  if (!queued) {
    // Reported from a closure of its own: the caller (the Backend) is in the middle of an event.
    std::string why =
        stuckReason(*runner) + "; the task could not be killed and its state is unknown";
    log()->error("task {}: {}", task_id, why);
    events_.post([registry = registry_, live = live_, task_id, why = std::move(why)]() mutable {
      endTask(*registry, *live, task_id, protocol::TaskState::kLost, std::move(why));
    });
  }
  return true;
}

std::optional<Json> PluginExecutor::threadDump(std::uint64_t task_id) {
  auto it = registry_->tasks.find(task_id);
  if (it == registry_->tasks.end()) return std::nullopt;
  Runner* runner = it->second;
  if (runner->calls->stuck()) return Json{{"task_id", task_id}, {"error", stuckReason(*runner)}};
  // The core thread waits here, bounded: a dump is asked for by hand, rarely.
  PluginResult result = runner->calls->call(
      {"thread_dump", task_id}, [runner, task_id] { return runner->plugin->threadDump(task_id); });
  if (!result.ok()) {
    if (result.status == DH_NOT_FOUND) return std::nullopt;
    return Json{{"task_id", task_id}, {"error", result.error}};
  }
  Json dump = Json::parse(result.json, nullptr, /*allow_exceptions=*/false);
  if (dump.is_discarded()) {
    return Json{{"task_id", task_id}, {"error", "the runner sent a malformed thread dump"}};
  }
  return dump;
}

void PluginExecutor::stopAll(Millis grace) {
  const TimePoint deadline = SteadyClock::now() + grace;
  std::vector<std::pair<std::uint64_t, std::string>> unkillable;
  for (const auto& [task_id, runner] : registry_->tasks) {
    const bool queued = runner->calls->submit(
        {{"kill", task_id}, [runner = runner, task_id = task_id] {
           runner->plugin->kill(task_id, /*interrupt=*/false, "executor stopping");
         }});
    if (!queued) unkillable.emplace_back(task_id, stuckReason(*runner));
  }
  for (auto& [task_id, why] : unkillable) {
    // Not waited for. Reported LOST unless the runner reported it ended already (then that
    // status is on its way); the runner's reports for it are ignored from now on.
    bool was_live;
    {
      std::lock_guard lock(live_->mutex);
      was_live = live_->tasks.erase(task_id) > 0;
    }
    if (!was_live) continue;
    const TaskLogScope scope(task_id);
    TaskStatusEvent event;
    event.task_id = task_id;
    event.state = protocol::TaskState::kLost;
    event.reason = why + "; the task could not be stopped and its state is unknown";
    log()->error("task {}: {}", task_id, event.reason);
    events_.post([registry = registry_, event = std::move(event)]() mutable {
      registry->statuses->onTaskStatus(event);
    });
  }
  for (auto& [task_id, fetch] : registry_->fetching) {
    fetch->kill_reason = "executor stopping";
    fetch->cancelled = true;
  }
  {
    std::unique_lock lock(live_->mutex);
    live_->ended.wait_until(lock, deadline,
                            [&] { return live_->tasks.empty() && live_->ingesting.empty(); });
  }
  if (!leave_runners_) destroyRunners(deadline);
}

std::vector<std::string> PluginExecutor::stopRunners(Millis grace) {
  destroyRunners(SteadyClock::now() + grace);
  return left_behind_;
}

void PluginExecutor::destroyRunners(TimePoint deadline) {
  if (runners_.empty()) return;
  for (auto& [name, runner] : runners_) {
    // A runner still in a call is not destroyed under it: its instance is left behind (see
    // plugin_instance.h), and the agent ends the process without waiting for it.
    if (!runner->calls->stop(deadline)) left_behind_.push_back(name);
    runner->plugin.reset();  // destroy(): kills what is left; no report follows
  }
  runners_.clear();
  registry_->tasks.clear();
  registry_->input_metrics.clear();
  std::unordered_set<std::uint64_t> left;
  for (const auto& [task_id, fetch] : registry_->fetching) left.insert(task_id);
  registry_->fetching.clear();
  {
    std::lock_guard lock(live_->mutex);
    left.insert(live_->tasks.begin(), live_->tasks.end());
    live_->tasks.clear();
  }
  // A runner that ended without reporting some task: report them so none stays running.
  for (std::uint64_t task_id : left) {
    TaskStatusEvent event;
    event.task_id = task_id;
    event.state = protocol::TaskState::kKilled;
    event.reason = "executor stopped";
    events_.post([registry = registry_, event = std::move(event)]() mutable {
      registry->statuses->onTaskStatus(event);
    });
  }
}

void PluginExecutor::onRunnerStatus(std::uint64_t task_id, std::int32_t state,
                                    std::string_view detail_json) {
  const TaskLogScope scope(task_id);
  auto event = toTaskStatusEvent(task_id, state, detail_json);
  if (!event) {
    log()->warn("task {}: runner reported unknown state {}; ignored", task_id, state);
    return;
  }
  if (protocol::isTerminal(event->state)) {
    // The task moves from `tasks` to `ingesting` at once and leaves `ingesting` only once its
    // event is posted: stopAll() (on the core thread) then finds its status queued before the
    // exit that follows.
    bool erased;
    {
      std::lock_guard lock(live_->mutex);
      erased = live_->tasks.erase(task_id) > 0;
      if (erased) live_->ingesting.insert(task_id);
    }
    if (!erased) {
      log()->warn("task {}: runner reported {} for a task that is not running; ignored", task_id,
                  protocol::toString(event->state));
      return;
    }
    // One look at what the task left: no directory (a runner that makes task directories made
    // none) or nothing in it means no blocks, and no trip through an I/O thread; a directory
    // left as the task got it can serve the next task as it is (offerUntouched).
    const LeftInDir left = lookAtEndedDir(taskDir(task_id));
    std::filesystem::path output_dir;  // where a finished task's blocks would be
    if (left == LeftInDir::kSomething && event->state == protocol::TaskState::kFinished &&
        block_store_ != nullptr) {
      output_dir = taskDir(task_id) / "output";
    }
    if (!output_dir.empty() && mayHoldEntries(output_dir)) {
      // Its outputs become blocks on an I/O thread; the event follows once they are stored.
      // `this` outlives the job: io_ is joined before anything else of the executor goes.
      io_->submit([this, store = block_store_, output_dir = std::move(output_dir),
                   block_url = block_url_ ? block_url_() : std::string(),
                   executor_id = executor_id_, event = std::move(*event)]() mutable {
        const TaskLogScope io_context(event.task_id);
        if (auto taken = ingestOutputs(*store, output_dir, block_url, executor_id, event.blocks);
            !taken) {
          log()->warn("task {}: {}", event.task_id, taken.error().message);
          event.state = protocol::TaskState::kFailed;
          event.reason = taken.error().message;
          event.blocks.clear();
        }
        // Its outputs are blocks now: a task that printed nothing left nothing else.
        postEnd(std::move(event), lookAtEndedDir(output_dir.parent_path()));
      });
      return;
    }
    postEnd(std::move(*event), left);
    return;
  }
  events_.post([registry = registry_, event = std::move(*event)]() mutable {
    deliver(*registry, event, /*terminal=*/false);
  });
}

void PluginExecutor::postEnd(TaskStatusEvent event, LeftInDir left) {
  const std::uint64_t task_id = event.task_id;
  // Before the status: a directory the task left as it got it is there for the launch that
  // the status may bring at once.
  const bool offered = offerUntouched(task_id, left);
  events_.post([registry = registry_, event = std::move(event)]() mutable {
    deliver(*registry, event, /*terminal=*/true);
  });
  // After the status: the I/O thread this may wake (to clear an old directory) would take the
  // CPU from this thread before the status left (a process task's status, measured: 0.1 ms).
  if (!offered) keepEndedDir(task_id, left);
  {
    std::lock_guard lock(live_->mutex);
    live_->ingesting.erase(task_id);
  }
  live_->ended.notify_all();  // stopAll() may go on
}

protocol::TaskMetrics PluginExecutor::takeInputMetrics(Registry& registry, std::uint64_t task_id) {
  auto inputs = registry.input_metrics.find(task_id);
  if (inputs == registry.input_metrics.end()) return {};
  protocol::TaskMetrics figures = std::move(inputs->second);
  registry.input_metrics.erase(inputs);
  return figures;
}

void PluginExecutor::deliver(Registry& registry, TaskStatusEvent& event, bool terminal) {
  if (terminal) {
    auto task = registry.tasks.find(event.task_id);
    if (task != registry.tasks.end()) {
      Runner& runner = *task->second;
      if (!event.dropped_metrics.empty() && !runner.metrics_warned) {
        runner.metrics_warned = true;
        log()->warn(
            "task runner '{}' reported figures that are not metrics (task {}: {}); they are left "
            "out, here and for its later tasks, without another warning",
            runner.name, event.task_id, fmt::join(event.dropped_metrics, ", "));
      }
      registry.tasks.erase(task);
    }
    event.metrics.merge(takeInputMetrics(registry, event.task_id));
  }
  registry.statuses->onTaskStatus(event);
}

}  // namespace dockhand::agent
