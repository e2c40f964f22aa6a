// Backend: the agent's core state machine (the role of Spark's CoarseGrainedExecutorBackend).
//
// Flow:   start() -> Connecting --connected--> FetchingConfig --AppConfig--> Registering
//                 --accepted--> Running --StopExecutor/Shutdown/signal/loss--> Stopping -> exit
//
// * Connecting: the link connects (Hello included); a failure is retried up to connect_tries
//   times (3 by default, as the seed does), then the agent exits with kBootstrapFailed.
// * FetchingConfig: RetrieveAppConfig; the reply sets the log level, properties, tokens and
//   the heartbeat/driver-timeout settings.
// * Registering: RegisterExecutor; a refusal exits with kRegistrationRefused.
// * Running: tasks are launched and killed through the Executor; status updates go to the
//   driver in order, queued while they cannot be sent (never dropped silently); heartbeats go
//   out every interval and a driver silent past its timeout counts as lost.
// * Reconnecting (with reconnect_timeout > 0; protocol.md 6.6): the connection dropped, or
//   the driver went silent, while Running. Tasks run on and their statuses queue; the link
//   connects again with back-off (reconnect_delay, doubling, at most reconnect_max_delay)
//   until reconnect_timeout has passed, then sends ResumeExecutor. Accepted: Running again,
//   each task the driver counts as running here gets its final status (queued, sent again
//   from the recent ends, or LOST when its launch never arrived). Refused, or out of time:
//   exit kDriverLost as without resuming. The code: backend_resume.cpp.
// * Stopping: entered once, by exitExecutor(), however many times exit is asked for. Running
//   tasks are stopped, the driver is told (RemoveExecutor) when that makes sense, and the
//   Exiter ends the process with the exit code.
//
// Decommission lives in DecommissionFlow (core/decommission_flow.h), a state machine the
// Backend owns and delegates to: the decommission signal, the driver's DecommissionExecutor,
// task ends and the exit reach it from here, and it asks back through DecommissionFlow::Host
// (running tasks, registered/stopping, in-order sends, exit). While it decommissions,
// LaunchTask is answered LOST ("executor <id> is decommissioning") and running tasks go on.
//
// Cores: tasks run within the registered cores. A LaunchTask whose cpus do not fit beside the
// running tasks waits, in arrival order, and starts the moment enough of them end (its RUNNING
// comes then). The reference driver sends tasks ahead like this when launch_ahead is set, so
// that a slot never idles for a driver round trip. A waiting task is killed without starting,
// answered LOST when decommissioning begins and KILLED on exit. A task larger than the agent
// waits until nothing runs, so nothing waits forever. The queue and its rule: CoreQueue
// (core/core_queue.h).
//
// Every method runs on the core thread, and the Backend never touches a socket itself. It
// blocks in two places only: the discover_resources hook before registering (discovery
// scripts run there, while nothing else is running), and the final Executor::stopAll() on
// the exit path.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "core/core_queue.h"
#include "core/decommission_flow.h"
#include "core/exit_codes.h"
#include "core/ports.h"
#include "core/task_log_url.h"
#include "dockhand/base/result.h"
#include "dockhand/metrics/metrics.h"
#include "dockhand/protocol/messages.h"

namespace dockhand::agent {

struct BackendOptions {
  std::string driver_url;
  std::string executor_id;
  std::string hostname;
  int cores = 1;
  std::string app_id;
  int resource_profile_id = 0;
  std::map<std::string, std::string> log_urls;
  std::map<std::string, std::string> attributes;
  std::map<std::string, protocol::ResourceInfo> resources;
  std::string block_url;
  // Where a task's logs are served: "{task_id}" and "{stream}" are replaced. Set: each
  // StatusUpdate carries log_urls {"stdout", "stderr"} of its task. Empty: none.
  std::string task_log_url;

  int connect_tries = 3;
  Millis connect_retry_delay{1000};
  // How long a registered agent tries to get its connection back before it exits
  // kDriverLost (protocol.md 6.6); 0: it exits at once, and registers without `resumes`.
  Millis reconnect_timeout{60000};
  Millis reconnect_delay{100};       // before the first try; doubled after each failed one
  Millis reconnect_max_delay{5000};  // the longest wait between two tries
  Millis ask_timeout{30000};
  Millis heartbeat_interval{10000};  // the app config's dockhand.heartbeat.interval_ms wins
  Millis driver_timeout{60000};      // the app config's dockhand.driver.timeout_ms wins
  Millis kill_memory{600000};        // how long a kill for a not-yet-launched task is kept
  // Where the task counters go (docs/operations.md#metrics); null: a registry of its own.
  metrics::Registry* metrics = nullptr;
  std::size_t max_remembered_kills = 100000;
  Millis stop_grace{5000};  // how long running tasks get to stop on exit
  // A task's RUNNING waits until the core thread is idle (sendHeldStatuses, from the event
  // loop's idle hook) and at least `running_hold` after the runner reported it, and is skipped
  // when the task ends first, as protocol.md 7.2 allows: a short task then costs the link and
  // the driver one StatusUpdate, not two. False: RUNNING is sent at once (for tests that drive
  // the Backend by hand).
  bool hold_running = false;
  // A `/bin/true` task lives about a millisecond from its launch: its RUNNING, sent, took a
  // quarter of the driver's CPU per task and 7 % of the core thread's (docs/benchmarks.md).
  // Longer tasks' RUNNING comes this much later; the driver never waits for one.
  Millis running_hold{2};

  // Called on the core thread with the app's resource profile once the app config arrived,
  // before registering: the resources to register, or why this agent cannot offer what the
  // profile asks (the agent then exits with resources-unavailable). It may block (discovery
  // scripts run here; nothing else runs before registration). Empty: register `resources` as
  // given.
  std::function<Result<std::map<std::string, protocol::ResourceInfo>>(
      const protocol::ResourceProfile& profile)>
      discover_resources;

  // This agent's previous process was registered with this driver under the same executor id
  // and ended without ending the session (a restart in place, an upgrade, a crash; see
  // app/agent_session.h): after the app config, it resumes (ResumeExecutor, listing the
  // blocks it kept and the tasks taken back) instead of registering. The driver's answer names
  // the tasks it counted as running here; those not taken back did not survive the old process
  // and are reported LOST (rerun elsewhere, no attempt counted). A refused resume (the
  // driver's grace window passed, or it restarted) stops the tasks taken back, reports nothing
  // of them, and registers anew on a new connection.
  bool resume_after_restart = false;
  // Called on the core thread just before that resume: gives the tasks the previous program
  // handed over back to their runners and returns those that run here again (with their cpus
  // and resources). May be empty: none.
  std::function<std::vector<HandedOverTask>()> take_back_tasks;
  // Called on the core thread by a restart in place that keeps the session, with the tasks
  // handed over to the next program (Executor::handOver), for the app to keep them on disk.
  // May be empty: every task is stopped instead.
  std::function<void(const std::vector<HandedOverTask>&)> on_handed_over;
  // How long a restart in place that keeps the session waits for the running tasks that cannot
  // be handed over (a library task on a thread, one fetching its inputs) to end by themselves
  // before it stops them (they are LOST then); launches that arrive meanwhile are LOST. 0:
  // stopped at once.
  Millis restart_wait{0};
  // Called when the driver refused that resume (the session on disk is over). May be empty.
  std::function<void()> on_resume_refused;

  // What the agent holds, for each heartbeat (on the core thread): its process's figures, its
  // tasks' processes' and its blocks (the Backend adds the peak of the tasks that ended since
  // the last heartbeat). May be empty: heartbeats carry none.
  std::function<protocol::AgentMetrics()> sample_usage;

  // Every block the agent holds, as ResumeExecutor lists them (on the core thread). Empty:
  // none.
  std::function<std::vector<protocol::BlockInfo>()> held_blocks;

  // Called on the core thread when the agent has registered and runs (the program tells the
  // service manager it is ready), and once when it begins to stop, with whether it restarts in
  // place (then the service manager is told it reloads, not that it stops: the same process
  // goes on and says it is ready again). Either may be empty.
  std::function<void()> on_running;
  std::function<void(bool restarting_in_place)> on_stopping;

  DecommissionOptions decommission;
};

// The Backend's part of the agent's state (Backend::figures()), made on the core thread.
struct BackendFigures {
  std::string state;  // "running", "registering", ..., "decommissioning"; empty before any
  std::size_t running_tasks = 0;
  std::size_t waiting_tasks = 0;  // launched ahead, waiting for cores
  int cores = 0;
  int cores_in_use = 0;
  std::size_t queued_updates = 0;  // status updates not yet sent
  std::optional<protocol::DecommissionProgress> decommission;
};

class Backend final : public DriverEvents, public TaskStatusSink, private DecommissionFlow::Host {
 public:
  enum class State {
    kIdle,
    kConnecting,
    kFetchingConfig,
    kRegistering,
    kRunning,
    kReconnecting,
    kStopping
  };

  // `decommissioner` may be null: decommission then only waits for running tasks.
  Backend(BackendOptions options, DriverLink& link, Executor& executor, Timers& timers,
          LogControl& log_control, Exiter& exiter, Decommissioner* decommissioner = nullptr);
  Backend(const Backend&) = delete;
  Backend& operator=(const Backend&) = delete;

  // Begins the bootstrap: connect to the driver.
  void start();

  // ---- Events (core thread) ----
  // From the driver link (DriverEvents).
  void onDriverConnected() override;
  void onDriverConnectFailed(const std::string& reason, bool retryable) override;
  // The handshake failed authentication (either side refused the other's proof): not
  // retried, the agent exits kAuthFailed.
  void onDriverAuthFailed(const std::string& reason) override;
  // A frame from the driver that is not a Reply (the link routes replies to ask callbacks).
  void onDriverFrame(const protocol::Envelope& frame) override;
  void onDriverDisconnected(const std::string& reason) override;
  // From the executor, behind the resource guard (TaskStatusSink).
  void onTaskStatus(const TaskStatusEvent& status) override;
  // The core thread is idle: sends the RUNNING updates held long enough (hold_running), and
  // sets a timer for those that are not yet.
  void sendHeldStatuses();
  void onWorkerLost(const std::string& reason);
  // A plugin cannot give back what it holds (dh_host.unrecoverable; a task thread that
  // ignored its kill): tell the driver, stop the other tasks, exit kTaskUnkillable.
  void onPluginUnrecoverable(const std::string& plugin, const std::string& reason);
  // A stop asked for locally (SIGTERM/SIGINT): stop tasks, tell the driver, exit 0.
  void onStopRequested(const std::string& reason);
  // The decommission signal (SIGPWR by default): ask the driver, then decommission.
  void onDecommissionSignal();
  // A restart in place (SIGUSR2): hand the running tasks over to the next program where
  // their runners can (on_handed_over), stop the others and report them LOST, send what is
  // queued, close the connection without RemoveExecutor (the driver holds the agent for its
  // grace window) and exit with kRestartInPlace, on which the program executes itself anew
  // and resumes (resume_after_restart).
  void onRestartRequested(const std::string& reason);

  // The single exit path. Runs once; later calls only log. notify_driver sends
  // RemoveExecutor(reason) when a driver is connected.
  void exitExecutor(ExitCode code, const std::string& reason, bool notify_driver);

  // ---- Observers (for tests and the status output) ----
  State state() const { return state_; }
  std::size_t runningTasks() const override { return running_.size(); }
  // Launched tasks waiting for cores (see above).
  std::size_t waitingTasks() const { return queue_.size(); }
  std::size_t queuedStatusUpdates() const { return outbox_.size(); }
  // Final statuses sent and kept in case the connection lost them (see Reconnecting).
  std::size_t recentEnds() const { return recent_ends_.size(); }
  // Connections resumed since start.
  std::uint64_t resumes() const { return resumes_; }
  std::size_t rememberedKills() const { return early_kills_.size(); }
  const std::map<std::string, std::string>& properties() const { return properties_; }
  bool hasDelegationTokens() const { return !delegation_tokens_.empty(); }
  Millis heartbeatInterval() const { return options_.heartbeat_interval; }
  Millis driverTimeout() const { return options_.driver_timeout; }
  std::optional<TimePoint> lastTaskFinish() const { return last_task_finish_; }
  bool decommissioning() const { return decommission_.decommissioning(); }
  // See DecommissionFlow::progress(): null unless decommissioning.
  Json decommissionProgress() const { return decommission_.progress(); }
  // The cores the running tasks asked for.
  int coresInUse() const;
  // The agent's state, typed (what /metrics and /readyz read).
  BackendFigures figures() const;
  // `f` (figures() of the same moment) for /v1/status: {"executor_id", "state",
  // "running_tasks", "waiting_tasks", "cores": {"total", "in_use"}, "queued_updates",
  // "decommission"}.
  Json statusJson(const BackendFigures& f) const;
  Json statusJson() const { return statusJson(figures()); }

 private:
  struct RunningTask {
    int cpus = 0;
    std::map<std::string, std::vector<std::string>> resources;
    TimePoint received{};  // when its LaunchTask arrived
    bool reported_running = false;
    // When it got its cores (its run time counts from here); unknown for a task taken back
    // after a restart in place.
    std::optional<TimePoint> started;
  };
  // The task counters, looked up once: counting a task is a few relaxed atomic adds.
  struct TaskCounters {
    explicit TaskCounters(metrics::Registry& registry);
    metrics::Counter& started;
    std::array<metrics::Counter*, 5> ended{};  // by protocol::TaskState
    metrics::Histogram& duration;
    metrics::Histogram& launch_latency;
    metrics::Counter& running_skipped;
    metrics::Histogram& cpu_time;  // of ended tasks whose runner measured it
    metrics::Histogram& peak_rss;
  };
  struct EarlyKill {
    std::string reason;
    TimePoint expires;
  };

  void setState(State next);
  void connect();
  void fetchAppConfig();
  void applyAppConfig(const Json& body);
  void registerWithDriver();
  void onRegistered();
  void scheduleHeartbeat();
  void heartbeat();

  // Reconnecting (backend_resume.cpp).
  bool resumable() const { return options_.reconnect_timeout.count() > 0; }
  // The connection is gone (`why`): reconnect, or exit when this agent does not resume.
  void connectionLost(const std::string& why);
  void scheduleReconnect();
  void onReconnectFailed(const std::string& reason, bool retryable);
  // What ResumeExecutor lists as running here: the tasks running or waiting for cores, and
  // those whose final status waits in the outbox (sorted).
  std::vector<std::uint64_t> tasksHere() const;
  void resume();
  void onResumed(const protocol::ResumeAccepted& accepted);
  // Registering, after a restart (resume_after_restart): ResumeExecutor, then Running, or a
  // registration on a new connection.
  void resumeAfterRestart();
  // A restart in place that keeps the session: running tasks go to the next program.
  void handOverTasks();
  // Statuses leave now, not through the outbox: not while Reconnecting, nor before the driver
  // took the agent back after a restart.
  bool sendsNow() const { return state_ != State::kReconnecting && !restart_resume_; }
  void onResumedAfterRestart(const protocol::ResumeAccepted& accepted);
  // The driver refused the resume after a restart: the tasks taken back are stopped, and
  // nothing of them is reported.
  void orphanTakenBack(const std::string& why);
  struct Outgoing;
  // A final status written to the link (`sent`, with its text): kept, a bounded number of
  // them, until a resume shows whether the driver had it.
  void rememberEnd(Outgoing sent);

  // The task handlers (backend_tasks.cpp).
  void handleLaunchTask(const protocol::Envelope& frame);
  // A StatusUpdate of `task` with no state yet.
  protocol::StatusUpdate statusOf(const protocol::TaskDescription& task) const;
  // Starts `task` (it passed every check and fits): the executor launches it.
  void startTask(const protocol::TaskDescription& task, TimePoint received);
  // Starts the waiting tasks that fit now, in order (or ends them, when the agent no longer
  // takes work).
  void startWaiting();
  // A terminal status's figures: the executor's and runner's, the run time and the blocks
  // written; counted in the task histograms.
  protocol::TaskMetrics measured(const TaskStatusEvent& status, const RunningTask& task,
                                 TimePoint now);
  // Reports `task`, which never started, ended with `state` and `reason`.
  void endUnstarted(const protocol::TaskDescription& task, protocol::TaskState state,
                    std::string reason);
  // Ends every waiting task with `state` and `reason` (decommission, exit).
  void endWaiting(protocol::TaskState state, const std::string& reason);
  void handleKillTask(const protocol::Envelope& frame);
  void handleThreadDump(const protocol::Envelope& frame);
  void replyError(const protocol::Envelope& frame, std::string_view code, std::string message);

  // DecommissionFlow::Host.
  bool registered() const override { return state_ == State::kRunning; }
  bool stopping() const override { return exiting_; }
  void decommissionBegan() override;
  void driverAnswered() override;
  bool sendInOrder(protocol::Envelope frame) override;
  void exit(ExitCode code, const std::string& reason) override;

  // The StatusUpdate that says `status` of `task`.
  protocol::StatusUpdate statusUpdate(const TaskStatusEvent& status, const RunningTask& task) const;
  void sendStatus(const protocol::StatusUpdate& update);
  // True when `frame` went out now; false when it waits in the outbox. A `final_status` is
  // remembered once written (rememberEnd).
  bool sendInOrder(protocol::Envelope frame, std::uint64_t task_id, bool final_status = false);
  bool sendInOrder(Outgoing out);
  // Writes `out` to the link now; a final status is remembered (rememberEnd) once written.
  bool write(Outgoing& out);
  void flushOutbox();
  void rememberKill(std::uint64_t task_id, const std::string& reason);
  void pruneEarlyKills();
  void finishExit(ExitCode code);

  BackendOptions options_;
  DriverLink& link_;
  Executor& executor_;
  Timers& timers_;
  LogControl& log_control_;
  Exiter& exiter_;

  State state_ = State::kIdle;
  bool exiting_ = false;
  int connect_attempts_ = 0;
  TimePoint last_driver_message_{};
  std::optional<Timers::TimerId> heartbeat_timer_;
  std::map<std::string, std::string> properties_;
  std::string delegation_tokens_;  // never logged
  std::unordered_map<std::uint64_t, RunningTask> running_;
  std::unordered_map<std::uint64_t, EarlyKill> early_kills_;
  // Frames that must reach the driver in order (status updates, block info), queued while
  // they cannot be sent; task_id names the task for the log (0: none).
  struct Outgoing {
    protocol::Envelope frame;
    std::uint64_t task_id = 0;
    bool final_status = false;
    // A remembered final status keeps its text only (a tree of its JSON, kept thousands of
    // frames long, cost more to free than the frame took to send); `frame` then has its type.
    std::string encoded{};
  };
  std::deque<Outgoing> outbox_;
  // Tasks whose RUNNING waits (hold_running), oldest first, each with when it may go.
  struct HeldRunning {
    std::uint64_t task_id = 0;
    TimePoint due{};
  };
  std::vector<HeldRunning> held_running_;
  std::optional<Timers::TimerId> held_running_timer_;  // armed while some wait past idle
  // The latest final statuses written to the link, oldest first (at most kRecentEnds).
  static constexpr std::size_t kRecentEnds = 4096;
  std::deque<Outgoing> recent_ends_;
  // While Reconnecting: when to give up, and the wait before the next try.
  TimePoint reconnect_deadline_{};
  Millis reconnect_wait_{0};
  std::string lost_because_;                // why the connection went, for the log
  bool decommission_after_resume_ = false;  // the decommission signal came while Reconnecting
  bool restart_resume_ = false;             // options_.resume_after_restart, until tried
  bool restarting_ = false;                 // onRestartRequested: stopped tasks are LOST
  // Tasks taken back after a restart whose session the driver refused: stopped, and nothing
  // of them is reported (the driver no longer counts them).
  std::unordered_set<std::uint64_t> orphaned_;
  bool keeps_session_on_restart_ = false;  // onRestartRequested: the next program resumes
  bool handed_over_ = false;               // handOverTasks ran (once per restart)
  std::string restart_reason_;
  std::optional<Timers::TimerId> restart_timer_;  // restart_wait running out
  std::uint64_t resumes_ = 0;
  std::optional<TimePoint> last_task_finish_;
  std::unique_ptr<metrics::Registry> own_metrics_;  // options_.metrics unset
  TaskCounters metrics_;
  // The largest peak_rss_bytes of the tasks that ended since the last heartbeat.
  std::uint64_t ended_peak_rss_ = 0;
  TaskLogUrlPattern task_log_url_;  // options_.task_log_url, split once
  CoreQueue queue_;                 // launched tasks waiting for cores

  // Constructed last: it keeps references to the ports above and to this Backend as its
  // Host.
  DecommissionFlow decommission_;
};

std::string_view toString(Backend::State state);

}  // namespace dockhand::agent
