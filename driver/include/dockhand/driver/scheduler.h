// Scheduler: the driver's state machine, as pure code (no sockets, no threads, no clock).
//
// It tracks the registered agents (cores, free cores, resource addresses, last message time)
// and the tasks of one job at a time, and decides what to send: every call that changes
// state appends the resulting Actions (launch this task there, kill that one, drop that
// agent) to an output vector that the caller carries out. Time comes in as an argument, so
// tests drive heartbeat expiry with a hand-made clock.
//
// Rules (after Spark's CoarseGrainedSchedulerBackend and TaskSetManager):
//  * A task needs `cpus` free cores and, per requested resource, that many free addresses
//    of the agent; the addresses are assigned and passed in TaskDescription.resources. No
//    two running tasks share an address, except for fractional amounts (Spark's rule): a
//    task asking for 0.25 takes a quarter of one address, so floor(1 / amount) such tasks
//    share it. Shares are counted in whole units (kResourceUnits per address), so the
//    accounting is exact.
//  * Every launch gets a fresh task_id; TaskDescription.attempt counts the launches of that
//    job task (0 for the first).
//  * FAILED, or KILLED when the driver did not ask for it, counts as a failed attempt; the
//    task is retried until max_attempts failures, then the job fails and its running tasks
//    are killed.
//  * LOST, or the loss of the agent (disconnected without RemoveExecutor, or silent for
//    agent_timeout), reschedules the task without counting an attempt.
//  * An executor id may be registered once at a time (duplicate_executor otherwise).
//  * An agent that registered with `resumes` (protocol.md 6.6) is not lost when its
//    connection drops: disconnectAgent() holds it for SchedulerOptions::reconnect_grace with
//    its running tasks (not rescheduled) and its block locations, launching nothing on it and
//    sending no reader to its blocks. resumeAgent() (ResumeExecutor within the window) makes it
//    active again; expireDisconnected() drops it as lost once the window has passed.
//
// Blocks (after Spark's BlockManagerMaster): UpdateBlockInfo tells where each block lives, at
// one or more holders (an agent, or "" for a store out of the agents); a BlockMap keeps the
// record. A task that lists "inputs" waits until every input has a holder it can be read from,
// and is launched with TaskDescription.inputs = [{id, url, size, checksum}]: the URL of an
// active holder (the target agent's own copy first), else an external store's URL, else for a
// fallback block "<block_url of an active agent>/blocks/<id>". A decommissioning holder is never
// read from: it is about to leave, so the reader waits until the block has moved (UpdateBlockInfo)
// or is lost. Nor is a disconnected (held) one: the reader waits until it resumes or expires (its
// blocks then go with it). When an agent leaves (lost, stopped, or after its decommission) its
// holdings go with it; a block left with no holder is lost, and if a task that reads it has not
// finished yet, the task that produced it runs again (counted in reruns_for_lost_blocks). A
// decommissioning agent takes no new tasks and is no peer for block migration.
//
// Fetch failures (after Spark's FetchFailed): a task that reports FAILED with `fetch_failed`
// could not read one of its inputs from the URL its launch named. That holder is taken as not
// having the block (a block left with no holder is lost, as above: its producer reruns), and
// the reader waits for its inputs again without the attempt counting against max_attempts. The
// same reader failing to fetch the same block max_attempts times fails the job.
//
// Not thread-safe: the owner (DriverService) serializes calls with its own mutex.
//
// The code: scheduler.cpp (agents, the job), scheduler_blocks.cpp (blocks, lost and
// unfetchable ones), scheduler_placement.cpp (matching a task to an agent, what a launch takes
// and gives back), scheduler_resume.cpp (holding a disconnected agent, its resume, its
// expiry).
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "dockhand/base/result.h"
#include "dockhand/driver/block_map.h"
#include "dockhand/driver/defaults.h"
#include "dockhand/driver/job_spec.h"
#include "dockhand/protocol/decommission_progress.h"
#include "dockhand/protocol/messages.h"

namespace dockhand::driver {

using SteadyClock = std::chrono::steady_clock;
using TimePoint = SteadyClock::time_point;
using Millis = std::chrono::milliseconds;

// Something the scheduler wants done on the wire.
struct Action {
  enum class Kind { kLaunch, kKill, kDisconnect };
  Kind kind = Kind::kLaunch;
  std::string agent_id;
  protocol::TaskDescription task;  // kLaunch
  std::uint64_t task_id = 0;       // kKill
  std::string reason;              // kKill, kDisconnect
  SteadyClock::duration waited{};  // kLaunch: how long the task waited to be placed
  bool ahead = false;  // kLaunch: sent beyond the agent's free cores; it waits there for one
  // kKill: not a failure but a recall: the task waited on its agent while a core elsewhere
  // was free, and runs again there once its agent says KILLED.
  bool recall = false;
};
using Actions = std::vector<Action>;

// kRegistered: known, but takes no task until it says LaunchedExecutor (its executor is up).
enum class AgentState { kRegistered, kActive, kDecommissioning };

// An agent's decommission as its heartbeats report it: the protocol's figures
// (protocol/decommission_progress.h, read leniently), of one agent.
struct DecommissionProgress : protocol::DecommissionProgress {
  std::string agent_id;
};
// Reads Heartbeat.decommission (all figures 0 when it is not an object).
DecommissionProgress parseDecommissionProgress(const std::string& agent_id, const Json& report);

std::string_view toString(AgentState state);

// The units one address of a resource holds: a task asking for a whole address takes all of
// them, one asking for a fraction `a` below 1 takes kResourceUnits / floor(1 / a).
constexpr std::int64_t kResourceUnits = 1'000'000'000'000;
// The units per address a task asking for `amount` takes (all of them when amount >= 1).
std::int64_t resourceUnitsPerAddress(double amount);
// The number of addresses it takes (1 for a fraction).
int resourceAddressCount(double amount);

struct AgentInfo {
  std::string id;
  std::string host;
  int cores = 0;
  int free_cores = 0;  // launch_ahead above the agent's own while it waits_for_cores
  int ahead = 0;       // tasks sent ahead now (launch_ahead): 0 for one that does not wait
  bool waits_for_cores = false;  // as registered: it holds tasks beyond its free cores
  std::map<std::string, std::vector<std::string>> resources;  // as registered
  // Per resource, the free units of each address, in the order of `resources`: an address
  // is whole (kResourceUnits), partly taken by fractional tasks, or fully taken (0).
  std::map<std::string, std::vector<std::int64_t>> free_units;
  std::string block_url;
  std::map<std::string, std::string> log_urls;  // as registered (e.g. "stdout" -> URL)
  AgentState state = AgentState::kRegistered;
  // It registered with `resumes`: a dropped connection holds it for the grace window.
  bool resumes = false;
  // Set while it is held without a connection (since when): it takes no task, its blocks are
  // not read, and it is no peer. `state` is what it will be again once it resumes.
  std::optional<TimePoint> disconnected_since;
  std::string disconnect_reason;  // why its connection ended, while disconnected
  TimePoint registered_at{};
  TimePoint last_seen{};
  std::size_t running = 0;
  std::uint64_t tasks_launched = 0;
  std::uint64_t tasks_finished = 0;  // launches that ended FINISHED
  std::uint64_t tasks_failed = 0;    // launches that ended FAILED, KILLED or LOST
  Json decommission;               // the latest Heartbeat.decommission; null when none was reported
  protocol::AgentMetrics metrics;  // from its latest heartbeat; empty from an older agent
};

// The agent's state as reported (/v1/executors, /v1/cluster, /metrics): "disconnected" while
// it is held without a connection, else toString(agent.state).
inline constexpr std::string_view kDisconnectedState = "disconnected";
std::string_view reportedState(const AgentInfo& agent);

// What became of one task of the job.
enum class TaskOutcome { kPending, kRunning, kFinished, kFailed, kKilled, kCancelled };
std::string_view toString(TaskOutcome outcome);

// A launch of a task that ended and was followed by another (a retry, a relaunch after a
// loss, a map task run again for a lost block): the live timeline's earlier bars.
struct EarlierAttempt {
  std::uint64_t task_id = 0;
  std::string agent_id;
  TimePoint launched_at{};
  Millis duration{0};
  std::string state;  // how it ended: FAILED, KILLED, LOST or FINISHED
};

struct TaskRecord {
  TaskSpec spec;
  TaskOutcome outcome = TaskOutcome::kPending;
  int launches = 0;           // attempts made so far
  int failures = 0;           // attempts that counted against max_attempts
  std::uint64_t task_id = 0;  // of the latest launch
  std::string agent_id;       // of the latest launch
  TimePoint launched_at{};
  // When it last became pending (submitted, or sent back for another attempt); the clock of
  // the scheduler call that did it.
  TimePoint pending_since{};
  Millis duration{0};  // of the latest finished attempt
  // From the latest terminal status update.
  Json result;
  std::string reason;
  std::optional<int> exit_code;
  std::optional<int> signal;
  std::string stderr_tail;
  std::map<std::string, std::string> log_urls;  // where its agent serves its logs, by stream
  std::map<std::string, int> fetch_failures;    // input block id -> launches that failed on it
  protocol::TaskMetrics metrics;                // what its latest ended attempt cost
  std::vector<EarlierAttempt> earlier;          // the last kMaxEarlierAttempts, oldest first
};
inline constexpr std::size_t kMaxEarlierAttempts = 8;

enum class JobState { kNone, kRunning, kSucceeded, kFailed };
std::string_view toString(JobState state);

// The moves each state machine allows (scheduler_states.cpp): the Scheduler changes a state only
// through its setAgentState, setOutcome and setJobState, which check them.
bool canMove(AgentState from, AgentState to);
bool canMove(TaskOutcome from, TaskOutcome to);
bool canMove(JobState from, JobState to);

struct Progress {
  std::size_t total = 0;
  std::size_t finished = 0;
  std::size_t running = 0;
  std::size_t pending = 0;
  std::size_t failed = 0;   // tasks that ran out of attempts
  std::size_t retries = 0;  // relaunches after a failed attempt
  std::size_t relaunches_after_loss = 0;
  std::size_t waiting_for_inputs = 0;      // pending tasks with an input nowhere to read
  std::size_t reruns_for_lost_blocks = 0;  // finished producers run again
  std::size_t fetch_failures = 0;          // launches that could not fetch an input
  std::size_t recalled = 0;  // launches sent ahead, recalled to run elsewhere (no attempt)
  std::vector<DecommissionProgress> decommissions;  // agents decommissioning now
};

// launch_ahead "auto" (SchedulerOptions): what makes a job's tasks short enough to send ahead,
// and how far. Tasks measured at 0 ms ran under a millisecond (agents truncate): a round trip to
// the driver is worth several of them, so each core gets kSubMillisecondAheadPerCore.
inline constexpr std::uint64_t kShortTaskMs = 10;
inline constexpr std::size_t kProvenShortTasks = 16;
inline constexpr int kSubMillisecondAheadPerCore = 4;

struct SchedulerOptions {
  int default_max_attempts = defaults::kMaxAttempts;
  Millis agent_timeout{defaults::kAgentTimeoutMs};
  // Cores' worth of tasks an agent that waits_for_cores is sent beyond its free cores
  // (DriverConfig::launch_ahead): its free_cores are that much above what it has free.
  // defaults::kLaunchAheadAuto: as many as the agent has cores, but only while the job's tasks
  // prove short: once its last kProvenShortTasks ended tasks each ran at most kShortTaskMs (the
  // run_time_ms their agents measured), until one runs longer; kSubMillisecondAheadPerCore
  // times that while the last kProvenShortTasks each ran under a millisecond. A task sent ahead
  // waits on its agent for a core (any of them frees it); at a job's tail one that still waits
  // while another agent has a free core of its own is recalled there (recallWaiting).
  int launch_ahead = 0;
  // How long an agent that registered with `resumes` is held after its connection drops
  // (DriverConfig::agent_reconnect_grace_ms, which the driver always passes). 0: nobody is
  // held, a dropped agent is lost.
  Millis reconnect_grace{0};
  // The most peers peersFor offers.
  std::size_t max_peers_offered = defaults::kMaxPeersOffered;
};

class Scheduler {
 public:
  explicit Scheduler(SchedulerOptions options = {});

  // ---- agents ----
  // Success, or a refusal whose Error code is a protocol::error_code.
  Result<void> registerAgent(const protocol::RegisterExecutor& reg, TimePoint now, Actions& out);
  // The agent's executor is up (LaunchedExecutor): its cores take tasks from now on.
  bool agentLaunched(const std::string& agent_id, TimePoint now, Actions& out);
  // Notes a message from the agent (any message counts as alive). False when unknown.
  bool touch(const std::string& agent_id, TimePoint now);
  // The agent is gone (it said RemoveExecutor, or its connection closed): its running tasks
  // are rescheduled without counting an attempt. False when it was not registered.
  bool removeAgent(const std::string& agent_id, const std::string& reason, Actions& out);
  // Stops new launches on the agent (it is decommissioning); running tasks go on. False when
  // the agent is unknown.
  bool decommissionAgent(const std::string& agent_id);
  // Notes the agent's Heartbeat.decommission; true when its "state" differs from the last
  // one noted (a change worth a log line).
  bool noteDecommissionProgress(const std::string& agent_id, const Json& report);
  // Notes the figures of the agent's heartbeat (Heartbeat.metrics); while a job runs, also
  // raises that job's peaks for the agent (jobAgentPeaks()).
  void noteAgentMetrics(const std::string& agent_id, const protocol::AgentMetrics& metrics);
  // The block servers that may take `asker`'s blocks: registered agents with a block_url,
  // not decommissioning, not disconnected, not the asker. At most max_peers_offered of them:
  // each call offers the next slice of the eligible agents (in id order, wrapping), so that
  // agents decommissioning together spread their blocks over the cluster.
  std::vector<protocol::Peer> peersFor(const std::string& asker);
  // Removes every connected agent silent for longer than agent_timeout (a kDisconnect action
  // each, to close its connection) and returns their ids. One that registered with `resumes`
  // is held as by disconnectAgent() instead of removed (the kDisconnect still closes it).
  std::vector<std::string> expireSilentAgents(TimePoint now, Actions& out);

  // ---- disconnected agents (scheduler_resume.cpp) ----
  // The agent's connection closed. One that registered with `resumes` (and a grace window
  // above 0) is held: its running tasks stay counted on it, its blocks stay recorded, but it
  // takes no launch and is read from by nobody until it resumes or expires; returns true.
  // False when the agent is unknown or not held (the caller then calls removeAgent).
  bool disconnectAgent(const std::string& agent_id, const std::string& reason, TimePoint now,
                       Actions& out);
  // ResumeExecutor: the held agent is back on a new connection. Refused (Error with code
  // not_resumable) for an unknown agent or one that is not disconnected. Otherwise it is
  // active again (a resumed agent's executor is up), the blocks it no longer lists are dropped
  // (lost ones rerun their producers), kills asked for while it was away are sent again, and
  // the reply lists the tasks counted as running on it, in id order.
  Result<protocol::ResumeAccepted> resumeAgent(const protocol::ResumeExecutor& resume,
                                               TimePoint now, Actions& out);
  // Removes, as lost, every agent held for longer than reconnect_grace (its tasks are
  // rescheduled without counting an attempt, its blocks dropped) and returns their ids.
  std::vector<std::string> expireDisconnected(TimePoint now, Actions& out);
  Millis reconnectGrace() const { return options_.reconnect_grace; }
  // The first time at which expireSilentAgents or expireDisconnected would remove an agent if
  // nothing changed meanwhile (a connected agent's last message + agent_timeout, a held one's
  // disconnection + reconnect_grace, each a millisecond past it); nullopt with no agent.
  std::optional<TimePoint> nextExpiry() const;

  const std::map<std::string, AgentInfo>& agents() const { return agents_; }
  const AgentInfo* agent(const std::string& id) const;

  // ---- blocks ----
  // UpdateBlockInfo from `agent_id`: `added` blocks live where each entry says, the sender
  // holds none of `removed` any more. May launch tasks that waited for these blocks, or
  // rerun a producer whose block is gone.
  void updateBlocks(const std::string& agent_id, const protocol::UpdateBlockInfo& update,
                    TimePoint now, Actions& out);
  // `holder` no longer has block `id` because the driver removed it there (a result block it
  // fetched): unlike a loss, nothing runs again for it.
  void forgetBlock(const std::string& id, const std::string& holder) {
    blocks_.removeHolder(id, holder);
  }
  // Where each block lives (blocks().heldBy(id): how many `id` holds).
  const BlockMap& blocks() const { return blocks_; }

  // ---- the job ----
  // Starts a job; the previous one, if any, must be over. Throws std::logic_error otherwise.
  void submit(JobSpec job, TimePoint now, Actions& out);
  // A status update from `agent_id`. Updates for unknown tasks, or from an agent other than
  // the one running the task, are ignored (counted in strayUpdates()). Taken by value: a
  // terminal update's result, reason, stderr and log URLs move into the task's record.
  void onStatusUpdate(const std::string& agent_id, protocol::StatusUpdate update, TimePoint now,
                      Actions& out);
  // Fails the running job with `reason` and kills its running tasks.
  void cancel(const std::string& reason, Actions& out);

  // The job's tasks that were told to stop (the job failed or was cancelled) and whose agents
  // have not yet said how they ended.
  std::size_t killsUnanswered() const;

  // True when launch `task_id` is running on `agent_id` (a status update from it counts).
  bool isRunningOn(std::uint64_t task_id, const std::string& agent_id) const;
  // The index in tasks() of running launch `task_id` of the current job, or nullopt.
  std::optional<std::size_t> runningIndex(std::uint64_t task_id) const;

  JobState jobState() const { return job_state_; }
  const std::string& failureReason() const { return failure_reason_; }
  // The job as submitted, less its tasks: each task's spec is in its record (tasks()[i].spec).
  const JobSpec& job() const { return job_; }
  const std::vector<TaskRecord>& tasks() const { return tasks_; }
  // The most each agent reported while the current (or last) job ran, from its heartbeats: the
  // job's peaks, as Spark keeps an executor's peaks per stage (one job runs at a time here).
  // Per agent: rss_bytes (the agent process), tasks_rss_bytes (its tasks' processes: the
  // larger of each beat's peak and sample, and at least the peak of each of the job's tasks
  // that ended on it), blocks and block_bytes; a figure nothing carried is absent, and an
  // agent that sent no heartbeat and ended no measured task during the job is not listed.
  const std::map<std::string, protocol::AgentMetrics>& jobAgentPeaks() const {
    return job_agent_peaks_;
  }
  Progress progress() const;
  int maxAttempts() const;
  std::uint64_t strayUpdates() const { return stray_updates_; }
  // State changes canMove() does not allow that were made anyway (a bug; logged). 0 in tests.
  std::uint64_t illegalMoves() const { return illegal_moves_; }
  // A reason the pending tasks can never run on the registered agents (a task asks for
  // more cores or resource addresses than any agent has), or nullopt.
  std::optional<std::string> unschedulableReason() const;

 private:
  struct RunningTask {
    std::uint64_t job_seq = 0;
    std::size_t index = 0;  // into tasks_
    std::string agent_id;
    int cpus = 0;
    std::map<std::string, std::vector<std::string>> resources;
    std::map<std::string, std::int64_t> units_each;  // units taken from each of those addresses
    bool kill_requested = false;
    std::string kill_reason;  // sent again when its agent resumes
    bool recalled = false;    // killed to run on a free core elsewhere (recallWaiting)
  };

  // True when the agent takes tasks: active and connected. Such agents, and only they, are in
  // by_free_cores_ and counted in total_free_cores_.
  static bool takesTasks(const AgentInfo& agent) {
    return agent.state == AgentState::kActive && !agent.disconnected_since;
  }

  bool fits(const TaskSpec& spec, const AgentInfo& agent) const;
  // True when every input of `spec` can be read from somewhere now (by any active agent).
  bool inputsReady(const TaskSpec& spec) const;
  // The URL a task on `target` reads the block from, or "" when nowhere.
  std::string inputUrl(const BlockLocation& block, const AgentInfo& target) const;
  // An active agent with a block server to read fallback blocks through (`preferred` first).
  const AgentInfo* fallbackReader(const AgentInfo* preferred) const;
  // Blocks that no longer exist anywhere: reruns their finished producers when a task that
  // reads them has not finished.
  void onBlocksLost(const std::vector<std::string>& ids, const std::string& why);
  // Task `index`'s launch on `reader` could not fetch `failure.block_id`: drops the holder it
  // was read from and sends the task back to wait for its inputs. False when that failed the
  // job (the same block failed max_attempts times).
  bool onFetchFailed(std::size_t index, const std::string& reader,
                     const protocol::FetchFailure& failure, Actions& out);
  AgentInfo* pickAgent(const TaskSpec& spec);
  // Keep by_free_cores_ and by_own_free_cores_ in step: unindexAgent() before an agent's free
  // cores, state or connection change, indexAgent() after (both act only on one that takesTasks()).
  void indexAgent(const AgentInfo& agent);
  void unindexAgent(const AgentInfo& agent);
  void launch(std::size_t index, AgentInfo& agent, TimePoint now, Actions& out);
  void schedule(TimePoint now, Actions& out);
  // Returns the cores and addresses of a finished launch to its agent.
  void release(const RunningTask& run);
  void failJob(const std::string& reason, Actions& out);
  // Moves what `record` keeps of `update` (its result, reason, stderr and log URLs) out of it.
  void recordStatus(TaskRecord& record, protocol::StatusUpdate& update);
  // The one way each state machine moves (scheduler_states.cpp).
  void setAgentState(AgentInfo& agent, AgentState to);
  void setOutcome(TaskRecord& task, TaskOutcome to);
  void setJobState(JobState to);
  // The task's latest attempt ended as `ended_as` and another will follow: the attempt goes
  // into `earlier`, and the task is pending again (it is the caller's to queue it).
  void sendBack(TaskRecord& task, std::string_view ended_as);
  void noteIllegalMove(std::string_view machine, const std::string& who, std::string_view from,
                       std::string_view to);
  // Raises jobAgentPeaks()[agent_id] by the figures of `beat` (a heartbeat's, or an ended task's).
  void raiseJobPeaks(const std::string& agent_id, const protocol::AgentMetrics& beat);
  // launch_ahead (scheduler_placement.cpp): what `agent` is sent ahead now; sets its ahead and
  // free cores to it; notes an ended task's run time (under "auto", it may change how far
  // every agent is sent ahead); sets that and applies it to every agent; starts a job unproven.
  int aheadFor(const AgentInfo& agent) const;
  void applyAhead(AgentInfo& agent);
  void noteRunTime(const protocol::TaskMetrics& metrics);
  void setAheadPerCore(int per_core);
  void resetAhead();
  // At a job's tail (nothing pending), tasks sent ahead that have not started are recalled
  // (a kKill with recall) from agents with no free core, for as many free cores as the
  // other agents have: a task never waits behind another while a core that could run it idles.
  void recallWaiting(Actions& out);
  // Launch `task_id` leaves running_: it no longer waits, nor holds cores a recall promised.
  void forgetRun(std::uint64_t task_id, const RunningTask& run);

  SchedulerOptions options_;
  std::map<std::string, AgentInfo> agents_;
  std::size_t peer_cursor_ = 0;  // where the next GetPeers slice starts (peersFor)
  int total_free_cores_ = 0;     // over agents that takesTasks()
  // The agents that takesTasks() as (-free cores, id): most free cores first, ties by id, so that a
  // pick looks at the best candidates first and stops at the first that fits, instead of scanning
  // every agent for every launch (dockhand-fleet-bench: 1,000 agents).
  std::set<std::pair<int, std::string>> by_free_cores_;
  // The same agents as (-(free cores of their own, launch_ahead not counted), id): a task goes
  // to an agent's own free core before any is sent ahead.
  std::set<std::pair<int, std::string>> by_own_free_cores_;

  JobSpec job_;
  std::uint64_t job_seq_ = 0;
  JobState job_state_ = JobState::kNone;
  std::string failure_reason_;
  std::vector<TaskRecord> tasks_;
  std::map<std::string, protocol::AgentMetrics> job_agent_peaks_;
  std::deque<std::size_t> pending_;                         // indices into tasks_, in launch order
  std::unordered_map<std::uint64_t, RunningTask> running_;  // by task_id
  std::uint64_t next_task_id_ = 1;
  std::size_t finished_ = 0;
  // launch_ahead "auto": ended tasks in a row of this job that ran at most kShortTaskMs, and
  // under a millisecond; what they prove: cores' worth of tasks sent ahead per core of an agent
  // that waits for cores (0, 1 or kSubMillisecondAheadPerCore).
  std::size_t short_in_a_row_ = 0;
  std::size_t sub_ms_in_a_row_ = 0;
  int ahead_per_core_ = 0;
  std::size_t recalled_ = 0;  // launches of this job recalled (recallWaiting)
  // Launches sent ahead that have not said RUNNING nor been recalled (by task_id: the last sent
  // last), and the cores of the recalled ones not yet answered.
  std::set<std::uint64_t> waiting_ahead_;
  int recalled_cores_ = 0;
  std::size_t retries_ = 0;
  std::size_t relaunches_after_loss_ = 0;
  std::uint64_t stray_updates_ = 0;
  std::uint64_t illegal_moves_ = 0;
  TimePoint now_{};

  BlockMap blocks_;
  std::map<std::string, std::size_t> producer_;  // block id -> index into tasks_ (this job)
  std::map<std::string, std::vector<std::size_t>> consumers_;  // block id -> readers
  std::size_t reruns_for_lost_blocks_ = 0;
  std::size_t fetch_failures_ = 0;
};

}  // namespace dockhand::driver
