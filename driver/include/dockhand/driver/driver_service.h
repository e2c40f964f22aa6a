// DriverService: the driver's protocol endpoint. It speaks the wire protocol on every agent
// connection (Hello, app config, registration, status updates, heartbeats, block locations,
// peers, decommissioning), feeds the Scheduler, and carries out the Scheduler's actions on
// the right connections. It also answers the control API on the same HTTP server:
//
//   GET  /v1/executors                    {"executors": [{executor_id, state, blocks, ...}],
//                                          "auth": {"required", "failures"}, ...}
//   POST /v1/executors/<id>/decommission  sends DecommissionExecutor; 404 for an unknown id
//   GET  /v1/cluster                      the status page's data: agents (state, cores,
//                                          resources in use, tasks, blocks, decommission
//                                          progress, log and metrics URLs) and the job's tasks
//   GET  /metrics                         Prometheus text (DriverMetrics), open like /healthz
//   GET  /, /status.js, /status.css       the status page (driver/status/, compiled in): static,
//                                          open like /healthz; it polls /v1/cluster, signing
//                                          each request in the browser when there is a secret
//
// With a cluster secret every control request must be signed with it (the block servers'
// Authorization scheme, the body as the signed content); unsigned or wrongly signed ones are
// answered 401 and counted with the handshake failures.
//
// A FINISHED update whose result is a block (a large library task result) is held back while
// a ResultFetcher thread fetches the block from the agent; the update then reaches the
// scheduler with the bytes as the result's value, or as FAILED saying why they could not be
// had (a failed attempt, retried as any other).
//
// An agent that registered with `resumes` and whose connection drops is held for
// agent_reconnect_grace_ms (Scheduler::disconnectAgent): it may come back on a new connection
// with ResumeExecutor; the ticker drops it as lost past the window.
//
// Threads: frames arrive on the connections' reader threads; one ticker thread sends the
// driver's heartbeats and expires silent agents and held ones past their window; result
// fetches run on the ResultFetcher's. All scheduler state is behind one mutex, held only for
// the scheduler call itself: decoding happens before, encoding after (on the connections'
// writer threads). Actions are queued on connections while the mutex is held, so a launch and
// a later kill of the same task reach the agent in that order.
//
// The code, by seam: driver_service.cpp (lifetime, the `run` side, actions, the ticker),
// driver_service_frames.cpp (the agent protocol), driver_service_handshake.cpp (Hello and
// authentication), driver_service_control.cpp (the /v1 control API),
// driver_service_results.cpp (results stored as blocks), driver_service_status.cpp (the status
// page and GET /v1/cluster).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>

#include "dockhand/driver/agent_server.h"
#include "dockhand/driver/agent_session.h"
#include "dockhand/driver/driver_config.h"
#include "dockhand/driver/driver_metrics.h"
#include "dockhand/driver/event_log.h"
#include "dockhand/driver/result_fetcher.h"
#include "dockhand/driver/scheduler.h"

namespace dockhand::driver {

// The software string sent in Hello replies ("dockhand-driver 0.1.0").
std::string driverSoftware();

struct ServiceCounters {
  std::uint64_t frames = 0;
  std::uint64_t bad_frames = 0;  // answered with an error
  std::uint64_t registrations = 0;
  std::uint64_t refused_registrations = 0;
  std::uint64_t agents_lost = 0;
  std::uint64_t stray_updates = 0;
  // Handshakes that failed authentication: peers this driver refused (no proof, wrong
  // proof) and agents that refused this driver's proof.
  std::uint64_t auth_failures = 0;
};

class DriverService : public FrameHandler {
 public:
  // `now` is the clock (tests may pass their own).
  // With an `event_log`, what happens is written to it (event_log.h).
  explicit DriverService(DriverConfig config, std::function<TimePoint()> now = SteadyClock::now,
                         std::unique_ptr<EventLog> event_log = nullptr);
  ~DriverService() override;
  DriverService(const DriverService&) = delete;
  DriverService& operator=(const DriverService&) = delete;

  // Properties served on top of the config's (a job's "properties"). Call before start().
  void addAppProperties(const std::map<std::string, std::string>& properties);
  // Listens on host:port (0 = ephemeral) and starts the ticker. Throws Poco::Exception.
  void start(const std::string& host, std::uint16_t port);
  std::uint16_t port() const;
  // Closes every connection and stops all threads. Idempotent.
  void stop();

  // ---- for the `run` command ----
  void submit(JobSpec job);
  void cancel(const std::string& reason);
  // The job's end, `wall` long: under the service's lock, the scheduler's own records as a
  // report go to the event log ("job_end"), if any, and then to `fn` (which prints it; nothing
  // is copied, and no update changes a record meanwhile).
  void endJob(std::chrono::milliseconds wall, const std::function<void(const JobReportView&)>& fn);
  // Waits until the job is over or `deadline`; returns the job's state then.
  JobState waitForJob(TimePoint deadline);
  // Waits until at least `count` agents are registered or `deadline`; returns the count.
  std::size_t waitForAgents(std::size_t count, TimePoint deadline);
  // Waits until no registered agent is decommissioning (each has left) or `deadline`;
  // returns how many still are.
  std::size_t waitForDecommissions(TimePoint deadline);
  // Waits until every task the ended job killed has its final status (its reason, its
  // duration) or `deadline`; returns how many have not.
  std::size_t waitForKills(TimePoint deadline);
  // Sends StopExecutor to every registered agent; returns how many were told.
  std::size_t stopAgents();

  // Sends DecommissionExecutor to the agent and stops launching tasks on it. False when no
  // agent of that id is registered.
  bool decommission(const std::string& executor_id, const std::string& reason);
  // The registered agents, as GET /v1/executors answers.
  Json executorsJson() const;
  // The cluster as GET /v1/cluster answers (the status page's data).
  Json clusterJson() const;

  // GET /metrics's text: the gauges set from the scheduler, then the service's registry.
  std::string metricsText();

  // Runs `fn` with the scheduler under the lock (for reports and progress).
  void inspect(const std::function<void(const Scheduler&)>& fn) const;
  ServiceCounters counters() const;
  // Log every task status update at info rather than debug (`serve`). Set before start().
  bool log_task_updates = false;

  // ---- FrameHandler ----
  void onOpen(const std::shared_ptr<Connection>& connection) override;
  void onFrame(const std::shared_ptr<Connection>& connection, std::string_view frame) override;
  bool onIdle(const std::shared_ptr<Connection>& connection) override;
  void onDropped(const std::shared_ptr<Connection>& connection, DropReason reason) override;
  std::optional<HttpReply> onHttpRequest(const ControlRequest& request) override;
  void onClose(const std::shared_ptr<Connection>& connection, const std::string& why) override;

 private:
  // The fields GET /v1/executors and GET /v1/cluster both give for an agent; `blocks` is how
  // many it holds (BlockMap::countByHolder), the free cores the agent's own (launch_ahead not
  // counted; never below 0). A held agent (disconnected, within its grace window) shows state
  // "disconnected".
  static Json agentSummaryJson(const AgentInfo& agent, std::size_t blocks, TimePoint now);
  // A /v1/ request of the control API.
  std::optional<HttpReply> controlRequest(const ControlRequest& request);
  // GET / and the page's script and style; nullopt for any other path.
  std::optional<HttpReply> statusPageRequest(const ControlRequest& request) const;
  // The checks a message passes before it is handled: the handshake, its direction, an id on
  // an ask, the session's state. False, having answered (or dropped) it, when one refuses it.
  bool admits(Connection& c, std::uint64_t id, const protocol::MessageSpec& spec,
              std::string_view type);
  void handle(const std::shared_ptr<Connection>& c, protocol::Envelope& env,
              const protocol::MessageSpec& spec);
  void handleHello(const std::shared_ptr<Connection>& c, const protocol::Envelope& env);
  void handleAuthenticate(const std::shared_ptr<Connection>& c, const protocol::Envelope& env);
  // Refuses a peer that failed authentication (auth_failed), counts it and closes.
  void refuseAuth(Connection& c, std::uint64_t id, const std::string& why);
  // Answers (or drops) a frame its connection's session does not admit (AgentSession::admit).
  void refuseBySession(Connection& c, std::uint64_t id, const SessionRefusal& refusal);
  // Tells the ticker what may move its next wake: it sleeps while no agent is registered (an
  // agent registered: `deadline_nearer` false, which wakes only that sleep, so a storm of
  // registrations costs the ticker nothing), and otherwise until the next heartbeat or
  // expiry, which a held agent's grace window may bring nearer (`deadline_nearer` true).
  void wakeTicker(bool deadline_nearer);
  // The session onOpen gave the connection.
  static AgentSession& session(Connection& c);
  void handleRegister(const std::shared_ptr<Connection>& c, const protocol::Envelope& env);
  // ResumeExecutor: binds this connection to the held agent, as a registration does.
  void handleResume(const std::shared_ptr<Connection>& c, const protocol::Envelope& env);
  // Logs that the scheduler holds the agent (its connection ended: `why`); caller holds mutex_.
  void logHeld(const std::string& agent_id, const std::string& why) const;
  // A StatusUpdate (frame id `id`), read by either reader (onFrame).
  void handleStatus(const std::shared_ptr<Connection>& c, std::uint64_t id,
                    protocol::StatusUpdate update);
  void handleHeartbeat(const std::shared_ptr<Connection>& c, const protocol::Envelope& env);
  // A FINISHED update whose result names a block: starts fetching it and returns true, or
  // returns false when the scheduler should take the update as it is (a stray one).
  bool fetchResultBlock(const std::string& agent_id, const protocol::StatusUpdate& update);
  // The fetch of `update`'s result block ended: hands the scheduler the update with the
  // bytes as its value, or a FAILED one saying why there are none.
  void resultFetched(const std::string& agent_id, protocol::StatusUpdate update,
                     const Result<std::string>& bytes);
  // Feeds a status update to the scheduler (which keeps what it needs of it) and carries out
  // what it decides.
  void applyStatus(const std::string& agent_id, protocol::StatusUpdate update);
  // Marks the agent decommissioning and logs it once; the caller holds mutex_.
  void markDecommissioning(const std::string& agent_id, const std::string& why);
  // Answers a frame that could not be handled: a Reply to its ask id, else an Error frame.
  void refuse(Connection& c, std::uint64_t id, std::string_view code, std::string message);
  // Carries out scheduler actions; the caller holds mutex_.
  void apply(Actions& actions);
  // The agent left the cluster (`reason`), for the event log; the caller holds mutex_.
  void agentGone(const std::string& agent_id, const std::string& reason);
  void tickerLoop();

  DriverConfig config_;
  std::function<TimePoint()> now_;
  protocol::AppConfig app_config_;
  std::unique_ptr<AgentServer> server_;

  mutable std::mutex mutex_;
  std::condition_variable changed_;
  Scheduler scheduler_;
  std::map<std::string, std::shared_ptr<Connection>> agent_connections_;
  std::set<std::string> told_to_stop_;  // agents sent StopExecutor: their close is expected
  // What GET /metrics serves: this service's own (the one place it counts, ServiceCounters).
  metrics::Registry registry_;
  DriverMetrics metrics_{registry_};
  std::unique_ptr<EventLog> event_log_;  // under mutex_; null without one
  // Checks control requests' signatures; set when there is a secret.
  std::unique_ptr<protocol::auth::RequestVerifier> control_verifier_;

  std::mutex ticker_mutex_;
  std::condition_variable ticker_cv_;
  bool stopping_ = false;
  // Under ticker_mutex_: the ticker sleeps for want of agents; an agent came; a deadline came
  // nearer (see wakeTicker).
  bool ticker_idle_ = false;
  bool agent_came_ = false;
  bool deadline_nearer_ = false;
  std::thread ticker_;
  std::atomic<bool> stopped_{false};
  // Last: stopped (its threads joined) before anything above goes.
  ResultFetcher result_fetcher_;
};

}  // namespace dockhand::driver
