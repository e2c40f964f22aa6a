// PluginExecutor: the Executor port, backed by task-runner plugins.
//
//   PluginExecutor executor(event_loop, status_sink, work_dir, executor_id);
//   auto runner = host.createTaskRunner("process", config_json, executor.runnerReports());
//   executor.addRunner("process", std::move(runner));
//
// Runners are created with runnerReports() as their status callback and added before the
// first launch. launch() makes <work_dir>/tasks/task-<id>/ (0700, in tasks/ of mode 0711) with
// output/ and input/ in it, builds
// the runner's task_json (with the DOCKHAND_* environment, DOCKHAND_OUTPUT_DIR and
// DOCKHAND_INPUT_DIR included) and hands it to the runner named by the task.
//
// Blocks: a task's inputs (TaskDescription.inputs) are fetched into input/<id>, verified, on
// an I/O thread before the runner gets the task; a failed fetch reports FAILED naming the
// block and URL, a kill during the fetch reports KILLED and the task never starts. With a
// block store attached, the files a FINISHED task left in output/ become blocks (named by
// their block ids) on an I/O thread; the FINISHED event then carries them, or the task is
// FAILED when an output is not a valid block id.
//
// Threads: launch/kill/threadDump/stopAll are called on the core thread, which keeps the task
// registry (task -> runner). The runner's hooks do not run there: they go through the
// runner instance's calls (plugins/plugin_calls.h), which run its launch/kill/thread_dump
// calls in order on a call thread of its own, each bounded by plugin_call_timeout_ms. A launch the
// runner refuses is reported as a FAILED status. Runners report from their own threads; each report
// is turned into a TaskStatusEvent there and posted to the core thread, where the registry is
// updated and the TaskStatusSink is told. The only state shared across threads is the set of live
// tasks that stopAll() waits on. threadDump() waits for its answer on the core thread, at most
// plugin_call_timeout_ms.
//
// A runner call that overruns plugin_call_timeout_ms makes the runner stuck for the rest of the
// agent's life: the task of a stuck launch (and of each launch queued behind it) is reported
// FAILED, the task of a stuck or dropped kill LOST, both with a reason naming the runner and
// the call; later launches are refused at once, a kill of one of its tasks reports it LOST,
// a thread dump answers an error. Its other tasks still report as they end. At exit a stuck
// runner is not destroyed (it is in a call): stopRunners() names it, and the agent ends the
// process without waiting for it.
//
// Lifetime: the EventSink must outlive the executor (runner threads post until the runners
// are destroyed, in stopAll() or the destructor). Posted closures hold the registry and the
// live set by shared_ptr, never the executor, so one that runs after the executor is gone
// touches nothing of it; they do tell the TaskStatusSink, which must outlive every closure the
// core thread still runs.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <Poco/Net/Context.h>

#include "blocks/block_server.h"
#include "blocks/block_store.h"
#include "blocks/io_pool.h"
#include "core/ports.h"
#include "dockhand/protocol/auth.h"
#include "executor/task_files.h"
#include "plugins/plugin_calls.h"
#include "plugins/task_runner_plugin.h"

namespace dockhand::agent {

// What a PluginExecutor is built with; all of it known before the first launch.
struct PluginExecutorOptions {
  std::filesystem::path work_dir;  // tasks' directories go under <work_dir>/tasks
  std::string executor_id;
  // Set: FINISHED tasks' outputs become blocks of this store (which must outlive the
  // executor), advertised at <block_url()>/blocks/<id>. block_url is asked when an output
  // is ingested, so it may name a server whose port is known only once it listens.
  BlockStore* store = nullptr;
  std::function<std::string()> block_url{};
  // Signs the GETs of task inputs (a cluster that authenticates).
  protocol::auth::RequestSigner signer{};
  // Input fetches over https:// with this client context (null: plain http://).
  Poco::Net::Context::Ptr tls{};
  std::size_t keep_task_dirs = 100;  // see keepTaskDirs()
};

class PluginExecutor final : public Executor {
 public:
  // Every status goes to `statuses` on the core thread. `events` and `statuses` must outlive
  // the executor; `statuses` is only stored here, so it may be built after the executor.
  PluginExecutor(EventSink& events, TaskStatusSink& statuses, PluginExecutorOptions options);
  ~PluginExecutor() override;

  // The callback a runner instance reports its tasks' states through (dh_host.task_status):
  // give it to the instance when it is created. Any thread; valid while the executor lives,
  // so every runner instance that reports must be destroyed before the executor (runners
  // added with addRunner() are).
  TaskStatusCallback runnerReports();
  // Tasks naming `name` go to `runner` from now on. Call before the first launch.
  void addRunner(const std::string& name, std::unique_ptr<TaskRunnerPlugin> runner);

  // How many ended tasks' directories stay (the most recent ones, for their stdout/stderr);
  // older ones are removed on an I/O thread once their runner reported them ended and their
  // outputs became blocks (PluginExecutorOptions::keep_task_dirs at first). Any thread, any
  // time (a reload changes it): the next task that ends applies it.
  void keepTaskDirs(std::size_t count);
  // Any thread (the block server's): opens a task's `stream` ("stdout" or "stderr", the files
  // its runner writes in its directory) for reading, or says why not: no such stream, a
  // directory reclaimed (keepTaskDirs), a task that never ran here, a task that wrote no such
  // file, a file that is not a regular file (a symlink is never followed).
  LogFile openTaskLog(std::uint64_t task_id, const std::string& stream) const;
  PluginExecutor(const PluginExecutor&) = delete;
  PluginExecutor& operator=(const PluginExecutor&) = delete;

  Result<void> launch(const protocol::TaskDescription& task) override;
  bool kill(std::uint64_t task_id, bool interrupt, const std::string& reason) override;
  std::optional<Json> threadDump(std::uint64_t task_id) override;
  void stopAll(Millis grace) override;
  // Restart in place (task_handover.cpp): each task whose runner has detach/adopt (plugin.h)
  // is handed over; one still fetching its inputs, or whose runner cannot, is not.
  std::vector<HandedOverTask> handOver() override;
  // In the next program, before the first launch: gives `task` back to its runner (adopt).
  // On success the task is running here, as if launched, and its end is reported as any
  // other's; an error says why it cannot be taken back (the caller reports it LOST).
  Result<void> adopt(const HandedOverTask& task) override;

  // Stops the runners' call threads and destroys the runners (once; stopAll() does it too),
  // waiting at most `grace` for calls in progress. Returns the runners left behind because a
  // call of theirs did not return (they are not destroyed; end the process without waiting).
  std::vector<std::string> stopRunners(Millis grace);

  // Any thread: from now on stopAll() stops tasks but leaves the runners undestroyed, for an
  // exit that must not destroy plugins (a plugin asked the agent to end: dh_host.unrecoverable).
  void leaveRunnersAtStop() { leave_runners_ = true; }

  // Core thread: each stuck runner and the call it is stuck in, as "launch() of task 7 did
  // not return within N ms (plugin_call_timeout_ms)" (for the status output).
  std::map<std::string, std::string> stuckRunners() const;

  // Core thread: the number of tasks launched and not yet reported ended.
  std::size_t runningTasks() const { return registry_->tasks.size(); }
  // The names of the runners, sorted.
  std::vector<std::string> runnerNames() const;

 private:
  // A runner and its instance's calls.
  struct Runner {
    std::string name;
    std::unique_ptr<TaskRunnerPlugin> plugin;
    PluginCalls* calls = nullptr;  // plugin->instance().calls()
    bool metrics_warned = false;   // core thread: it reported a bad figure once
  };
  // The task_json `runner` gets for `task`.
  std::string taskJson(const protocol::TaskDescription& task, const std::filesystem::path& task_dir,
                       const Runner& runner) const;
  // A task whose inputs are being fetched: the runner gets it once they are all here.
  struct Fetch {
    Runner* runner = nullptr;
    std::string task_json;
    std::atomic<bool> cancelled{false};
    std::string kill_reason;  // core thread
  };
  // Core-thread state, shared with the closures posted to the core thread.
  struct Registry {
    std::unordered_map<std::uint64_t, Runner*> tasks;
    std::unordered_map<std::uint64_t, std::shared_ptr<Fetch>> fetching;
    // Launched tasks that had inputs: what fetching them took, for their terminal status.
    std::unordered_map<std::uint64_t, protocol::TaskMetrics> input_metrics;
    TaskStatusSink* statuses = nullptr;
    std::function<void(std::uint64_t)> retire_dir;  // retireTaskDir()
  };
  // Why an ended task has no directory here.
  enum class NoDir : std::uint8_t {
    kNeverHad,     // a runner that makes directories made none: the task wrote nothing
    kReclaimed,    // removed or reused past keep_task_dirs
    kWroteNothing  // it left its directory as it got it, and another task took it (its logs
                   // are empty)
  };
  // Tasks a runner accepted and has not reported ended; guarded by its mutex.
  struct Live {
    std::mutex mutex;
    std::condition_variable ended;
    std::unordered_set<std::uint64_t> tasks;
    // Ended, and the status not yet posted to the core thread (FINISHED: outputs becoming
    // blocks first).
    std::unordered_set<std::uint64_t> ingesting;
    std::deque<std::uint64_t> ended_dirs;  // ended tasks' directories still kept
    // Ended tasks that have no directory here (any more), so that their logs answer why (see
    // NoDir). The most recent kMaxRememberedEnded of them.
    std::unordered_map<std::uint64_t, NoDir> no_dir;
    std::deque<std::uint64_t> no_dir_order;
    // Directories of ended tasks that left nothing in them (LeftInDir::kNothing), under their
    // tasks' names still, at most kMaxSpareDirs: a new task's directory is one of them renamed
    // (within tasks/) when there is one, before a spare. By task id, with the path.
    std::vector<std::pair<std::uint64_t, std::filesystem::path>> untouched;
    std::vector<std::filesystem::path> doomed;  // to reuse or remove, by one I/O job at a time
    bool removing = false;                      // that job is queued or running
    // Doomed directories cleared for another task (clearForReuse) and parked in tasks/spare/,
    // at most kMaxSpareDirs: a new task's directory is one of them renamed when there is one.
    std::vector<std::filesystem::path> spares;
    std::uint64_t spares_made = 0;  // I/O job only: names them
    // I/O job only: whether tasks/spare/ was made (emptied of an earlier agent's spares) and
    // can be used; unset until the first directory is reclaimed.
    std::optional<bool> spare_dir_usable;
  };

  void onRunnerStatus(std::uint64_t task_id, std::int32_t state, std::string_view detail_json);
  // Core thread: the runner's report of the task goes to the TaskStatusSink; a terminal one
  // ends the task here (with its input figures, and a warning the first time its runner sent
  // a bad figure).
  static void deliver(Registry& registry, TaskStatusEvent& event, bool terminal);
  // Core thread: the ended task's input figures (empty for a task without inputs), forgotten.
  static protocol::TaskMetrics takeInputMetrics(Registry& registry, std::uint64_t task_id);
  // A task's end (any thread): its status posted to the core thread, then its directory
  // retired (`left`: what the task left in it), then it leaves `ingesting` and stopAll() may
  // go on.
  void postEnd(TaskStatusEvent event, LeftInDir left);
  // Core thread: fetches the task's inputs on an I/O thread; its runner gets the task once they
  // are all here (task_inputs.cpp).
  void startFetch(const protocol::TaskDescription& task, Runner* runner, std::string task_json,
                  const std::filesystem::path& input_dir);
  // Core thread: registers the task with `runner` and launches it: on this thread when the
  // runner can start it at once (try_launch), else through its call thread; false when the
  // runner is stuck (the task is not registered then). `make_dir`: the task's directory to
  // make first, on the thread that launches (off the core thread's path for a call thread's
  // runner); a directory that cannot be made fails the task.
  static bool submitLaunch(EventSink& events, const std::shared_ptr<Registry>& registry,
                           const std::shared_ptr<Live>& live, Runner* runner, std::uint64_t task_id,
                           std::string task_json,
                           std::optional<std::filesystem::path> make_dir = std::nullopt);
  // The thread that launches: makes the task's directory (makeTaskDir), or reports the task
  // FAILED as launchRefused does and returns false.
  static bool madeForLaunch(EventSink& events, const std::shared_ptr<Registry>& registry,
                            const std::shared_ptr<Live>& live, std::uint64_t task_id,
                            const std::filesystem::path& dir);
  // Any thread: the runner refused to start the task (`reason`); reported FAILED on the core
  // thread.
  static void launchRefused(EventSink& events, const std::shared_ptr<Registry>& registry,
                            const std::shared_ptr<Live>& live, std::uint64_t task_id,
                            std::string reason);
  // Core thread: reports the task ended with `state` unless it has already ended (or its
  // runner reported it ended: that status is on its way). True when this reported it.
  static bool endTask(Registry& registry, Live& live, std::uint64_t task_id,
                      protocol::TaskState state, std::string reason);
  // Core thread: what happens when `runner`'s call overran (see the header comment).
  static void onRunnerStuck(Registry& registry, Live& live, const std::string& name,
                            const std::string& what, const PluginCalls::CallInfo& stuck,
                            const std::vector<PluginCalls::CallInfo>& dropped);
  std::string stuckReason(const Runner& runner) const;
  void destroyRunners(TimePoint deadline);
  std::filesystem::path taskDir(std::uint64_t task_id) const;
  // Core thread: creates <work_dir>/tasks once; fails saying why not.
  Result<void> makeTasksDir();
  // Any thread: a task's directory, output/ and input/ (see launch()): an untouched or spare
  // one renamed when there is one; fails saying why not.
  static Result<void> makeTaskDir(Live& live, const std::filesystem::path& task_dir);
  // Any thread: renames an untouched directory (Live::untouched) or else a spare one to
  // `task_dir`; false when there is none (or it cannot be).
  static bool takeSpareDir(Live& live, const std::filesystem::path& task_dir);
  // I/O job: clears `dir` and parks it in tasks/spare/ when there is room, else removes it.
  static void reuseOrRemove(Live& live, const std::filesystem::path& spare_root,
                            const std::filesystem::path& dir);
  // Any thread: the task ended and its runner and outputs are done with its directory; one look
  // at what it left, then offerUntouched, or else keepEndedDir. Once per task.
  void retireTaskDir(std::uint64_t task_id);
  // Any thread: the task's directory (what it `left`, which offerUntouched did not take) is
  // kept, and the oldest beyond keep_task_dirs_ are reused or removed on an I/O thread. A task
  // with no directory (see launch()) is only remembered: no I/O thread wakes for it.
  void keepEndedDir(std::uint64_t task_id, LeftInDir left);
  // Any thread: when the task left its directory as it got it (`left`) and fewer than
  // kMaxSpareDirs wait, offers it to the next launch (Live::untouched), its logs answering
  // empty from here on; true then.
  bool offerUntouched(std::uint64_t task_id, LeftInDir left);
  // Under live_->mutex: remembers that `task_id` has no directory here (see Live::no_dir).
  void rememberNoDir(std::uint64_t task_id, NoDir why);
  // Under live_->mutex: why the ended `task_id` has no directory here, if it is remembered.
  std::optional<NoDir> noDirOf(std::uint64_t task_id) const;

  EventSink& events_;
  std::filesystem::path work_dir_;
  std::string executor_id_;
  std::shared_ptr<Registry> registry_;
  std::shared_ptr<Live> live_;
  std::map<std::string, std::unique_ptr<Runner>> runners_;
  std::vector<std::string> left_behind_;  // runners not destroyed: a call did not return
  bool tasks_dir_ready_ = false;          // <work_dir>/tasks exists with mode 0711
  std::size_t keep_task_dirs_ = 100;      // under live_->mutex
  std::atomic<bool> leave_runners_{false};
  BlockStore* block_store_ = nullptr;
  std::function<std::string()> block_url_;
  protocol::auth::RequestSigner signer_;
  Poco::Net::Context::Ptr tls_;
  std::unique_ptr<IoPool> io_;  // input fetches and output ingestion; joined first
};

// Turns a runner's report into a TaskStatusEvent; nullopt for an unknown state.
std::optional<TaskStatusEvent> toTaskStatusEvent(std::uint64_t task_id, std::int32_t state,
                                                 std::string_view detail_json);

}  // namespace dockhand::agent
