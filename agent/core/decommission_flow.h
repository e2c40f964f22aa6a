// DecommissionFlow: the agent's decommission (the seed's decommissionSelf and its wait loop), a
// state machine of its own that the Backend runs and delegates to.
//
// Flow:   Inactive --signal--> AskingDriver --accepted--> Decommissioning --done--> Finished
//            |                    |   \--refused/no answer--> Inactive
//            \--driver's DecommissionExecutor (also while AskingDriver)--/
//                                     Decommissioning --deadline--> DeadlinePassed
//
// * AskingDriver: the decommission signal (SIGPWR by default) first tells the driver
//   (ExecutorDecommissioning); only its acceptance starts decommissioning. The driver's own
//   DecommissionExecutor starts it at once, from here too.
// * Decommissioning: the Backend answers LaunchTask LOST, running tasks go on, and the
//   Decommissioner migrates blocks in passes, one at a time, each over the driver's current
//   peers (GetPeers). A timer checks every check_interval: once no task runs and a pass that
//   STARTED after the last task ended moved every block (with migration off: once no task
//   runs), the flow moves to Finished and the Backend exits 0 ("decommission finished").
//   What the status shows as its `state` (waiting-for-tasks, migrating, finishing) is what
//   this phase waits for now, read from the running tasks; it is not a phase of its own.
// * DeadlinePassed: the optional deadline came first; the blocks not moved are logged and the
//   Backend exits kDecommissionIncomplete.
// * Finished and DeadlinePassed are final. A second trigger in any phase but Inactive, or a
//   trigger while decommission is disabled, the executor stops or before it registered, is
//   logged and ignored. moveTo() is the one place the phase changes; it refuses (logs) any
//   move not drawn above.
//
// The Backend's exit, whatever its cause, ends the flow where it stands: stop() cancels the
// timers and asks a running pass to stop; answers and pass results that still arrive are
// dropped. The phase is kept, so the status goes on showing how far decommission came.
//
// Threading and lifetime: every method runs on the core thread, and so do the callbacks it
// gives the ports (the ports' contract). Those callbacks capture `this`: the flow lives as
// long as the ports that may still call them (the Backend owns it, beside the ports it is
// given).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/exit_codes.h"
#include "core/ports.h"
#include "dockhand/protocol/decommission_progress.h"

namespace dockhand::agent {

struct DecommissionOptions {
  bool enabled = true;
  Millis check_interval{1000};  // the wait loop's period (the seed sleeps 1 s)
  Millis deadline{0};           // 0: wait as long as it takes
};

enum class DecommissionPhase {
  kInactive,
  kAskingDriver,
  kDecommissioning,
  kFinished,
  kDeadlinePassed
};

std::string_view toString(DecommissionPhase phase);

class DecommissionFlow {
 public:
  using Phase = DecommissionPhase;

  // What the flow needs of the agent around it (the Backend). Called on the core thread.
  class Host {
   public:
    virtual ~Host() = default;
    // Tasks running now (launched, no terminal status yet).
    virtual std::size_t runningTasks() const = 0;
    // The executor registered with the driver and runs (decommission makes sense only then).
    virtual bool registered() const = 0;
    // The executor began to exit (for any reason).
    virtual bool stopping() const = 0;
    // Decommissioning has begun: the host stops what has not started yet.
    virtual void decommissionBegan() {}
    // An ask of the flow was answered: the driver is alive.
    virtual void driverAnswered() = 0;
    // Sends `frame` to the driver behind every status update not sent yet. True when it went
    // out now; false when it waits in the queue.
    virtual bool sendInOrder(protocol::Envelope frame) = 0;
    // Exits the executor with `code`, telling the driver `reason` (RemoveExecutor).
    virtual void exit(ExitCode code, const std::string& reason) = 0;
  };

  // `decommissioner` may be null: decommissioning then only waits for running tasks.
  DecommissionFlow(DecommissionOptions options, std::string executor_id, Millis ask_timeout,
                   DriverLink& link, Timers& timers, Decommissioner* decommissioner, Host& host);
  DecommissionFlow(const DecommissionFlow&) = delete;
  DecommissionFlow& operator=(const DecommissionFlow&) = delete;

  // ---- Events (core thread) ----
  // The decommission signal: ask the driver, then decommission.
  void onSignal();
  // The driver's DecommissionExecutor: decommission now.
  void onDriverRequest(const std::string& reason);
  // A task ended (terminal status, refused launch, or a kill that overtook its launch).
  void onTaskEnded();
  // The executor exits: cancel the timers and a running pass.
  void stop();

  // ---- Observers ----
  Phase phase() const { return phase_; }
  // Decommissioning started (and maybe ended): Decommissioning, Finished or DeadlinePassed.
  bool decommissioning() const;
  // How far it has got, while decommissioning; nothing otherwise.
  std::optional<protocol::DecommissionProgress> figures() const;
  // figures() as the heartbeat and /v1/status carry it.
  Json progress() const { return protocol::toJson(figures()); }

  // Whether moveTo(to) is allowed from `from` (the arrows drawn above).
  static bool isLegalMove(Phase from, Phase to);

 private:
  bool moveTo(Phase next);
  void onDriverAnswer(const AskResult& result);
  void begin(const std::string& reason);
  bool migrationEnabled() const;
  void scheduleCheck();
  void check();
  void finish(std::string_view why);
  void startPass();
  void onPassDone(const MigrationPassResult& result, std::uint64_t ends_at_start);
  void deadlinePassed();

  DecommissionOptions options_;
  std::string executor_id_;
  Millis ask_timeout_;
  DriverLink& link_;
  Timers& timers_;
  Decommissioner* decommissioner_;
  Host& host_;

  Phase phase_ = Phase::kInactive;
  std::optional<Timers::TimerId> check_timer_;
  std::optional<Timers::TimerId> deadline_timer_;
  // Task ends seen, ever: orders passes and task ends (a pass proves every block moved only
  // if no task ended, and so left blocks, since it started).
  std::uint64_t task_ends_ = 0;
  bool pass_running_ = false;          // from its GetPeers ask until its result
  bool last_pass_conclusive_ = false;  // the last pass moved every block it saw
  std::uint64_t last_pass_ends_ = 0;   // task_ends_ when that pass started
  std::uint64_t passes_ = 0;
  std::uint64_t blocks_migrated_ = 0;
  std::uint64_t bytes_migrated_ = 0;
  std::size_t blocks_failed_ = 0;  // in the last pass
  std::size_t blocks_left_ = 0;
  std::uint64_t bytes_left_ = 0;
  MigrationPassProgress pass_progress_;         // of the pass running now
  std::optional<TimePoint> migration_started_;  // when the first pass began
};

}  // namespace dockhand::agent
