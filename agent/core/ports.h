// The interfaces through which the Backend (the agent's core state machine) acts on the world.
//
// The Backend is pure logic on ONE thread: it receives events one at a time and acts only
// through these ports. Real implementations live in agent/rpc, agent/executor and agent/app;
// unit tests give it fakes and drive every transition by hand.
//
// Threading contract for every port: the Backend calls it on the core thread. Anything a port
// must tell the Backend later (a connection made, a reply, a task's status) it posts back onto
// the core thread through the EventSink it was given; it never calls the Backend directly from
// another thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "dockhand/base/result.h"

#include "dockhand/protocol/envelope.h"
#include "dockhand/protocol/messages.h"
#include "dockhand/protocol/usage.h"

namespace dockhand::agent {

using Json = protocol::Json;
using SteadyClock = std::chrono::steady_clock;
using TimePoint = SteadyClock::time_point;
using Millis = std::chrono::milliseconds;

// Runs a closure on the core thread. Implemented by the EventLoop; any thread may call it.
class EventSink {
 public:
  virtual ~EventSink() = default;
  virtual void post(std::function<void()> event) = 0;
  // Runs `on_readable` on the core thread whenever descriptor `fd` has something to read (or
  // has ended), until unwatch(fd): the driver link reads its socket there, with no thread
  // between the socket and the Backend. Any thread. False when this sink cannot (the caller then
  // reads on a thread of its own and posts what it reads).
  // NOLINTNEXTLINE(performance-unnecessary-value-param): an override keeps the callback
  virtual bool watch(int /*fd*/, std::function<void()> /*on_readable*/) { return false; }
  // Stops watch(fd); once it returns on the core thread, `on_readable` is not called again.
  virtual void unwatch(int /*fd*/) {}
};

// Timers and time, so that tests can run the clock by hand.
class Timers {
 public:
  using TimerId = std::uint64_t;
  virtual ~Timers() = default;
  virtual TimePoint now() const = 0;
  // Runs `fn` on the core thread after `delay`. Returns an id for cancel().
  virtual TimerId schedule(Millis delay, std::function<void()> fn) = 0;
  virtual void cancel(TimerId id) = 0;
};

// The outcome of an ask: the driver's Reply, or why none came (timeout, disconnect).
struct AskResult {
  bool ok = false;
  Json body;                  // the reply's body when ok
  protocol::ErrorInfo error;  // when !ok: the driver's refusal, or timeout/disconnected
};
using AskCallback = std::function<void(AskResult)>;

// The connection to the driver: one WebSocket, Hello handshake included.
//
// connect() starts connecting in the background and later posts exactly one of
// Backend::onDriverConnected() or Backend::onDriverConnectFailed(reason). After a successful
// connect, incoming frames are posted as Backend::onDriverFrame() and a lost connection as
// Backend::onDriverDisconnected(reason) (once). Sending never blocks on the network for long.
class DriverLink {
 public:
  virtual ~DriverLink() = default;
  virtual void connect() = 0;
  virtual bool connected() const = 0;
  // Sends a message (ids are assigned by the link). False when not connected.
  virtual bool send(const protocol::Envelope& message) = 0;
  // Sends a message of `type` its sender already encoded (encodeEnvelope) and keeps as text.
  // This default decodes it again and sends that.
  virtual bool sendEncoded(std::string_view /*type*/, const std::string& text) {
    auto frame = protocol::decodeEnvelope(text);
    return frame && send(*frame);
  }
  // Sends an ask; `done` runs on the core thread with the reply, or with a timeout or
  // disconnect error. It runs exactly once.
  virtual void ask(protocol::Envelope message, Millis timeout, AskCallback done) = 0;
  // Closes the connection (no disconnect event follows a close the agent asked for).
  virtual void close() = 0;
  // Writes now what the link keeps to write together later (WebSocketLink keeps the core
  // thread's frames until that thread is idle). A link that keeps nothing does nothing.
  virtual void flush() {}
};

// What a runner reported about a task, posted to Backend::onTaskStatus().
struct TaskStatusEvent {
  std::uint64_t task_id = 0;
  protocol::TaskState state = protocol::TaskState::kRunning;
  Json result;
  std::string reason;
  std::optional<int> exit_code;
  std::optional<int> signal;
  std::string stderr_tail;
  // FINISHED only: the blocks the task left (already in the block store). The Backend tells
  // the driver about them (UpdateBlockInfo) before it reports the task finished.
  std::vector<protocol::BlockInfo> blocks;
  // FAILED only: the input that could not be fetched (the driver reruns what made it).
  std::optional<protocol::FetchFailure> fetch_failed;
  // Terminal states: what the runner and the executor measured (the Backend adds its own).
  protocol::TaskMetrics metrics;
  // The runner's figures that were left out of `metrics`, as "name: why" (the executor warns
  // once per runner).
  std::vector<std::string> dropped_metrics;
};

// Where a task's status reports go, on the core thread: the Backend, behind the resource
// guard that gives a finished task's addresses back first. The executor is built with one
// and posts every runner report to it.
class TaskStatusSink {
 public:
  virtual ~TaskStatusSink() = default;
  virtual void onTaskStatus(const TaskStatusEvent& status) = 0;
};

// What the driver link reports, on the core thread (the link posts each call through its
// EventSink). Implemented by the Backend; the link is built with it.
class DriverEvents {
 public:
  virtual ~DriverEvents() = default;
  virtual void onDriverConnected() = 0;
  // `retryable`: false when the driver does not speak the protocol (no point in a retry).
  virtual void onDriverConnectFailed(const std::string& reason, bool retryable) = 0;
  // The handshake failed authentication, on either side: never retried.
  virtual void onDriverAuthFailed(const std::string& reason) = 0;
  // A frame from the driver that is not a Reply (replies go to their asks' callbacks).
  virtual void onDriverFrame(const protocol::Envelope& frame) = 0;
  // The connection was lost (not after a close() the agent asked for).
  virtual void onDriverDisconnected(const std::string& reason) = 0;
};

// A running task handed over to the agent's next program by a restart in place: the task
// runs on, and the next program takes it back (plugin.h, detach and adopt).
struct HandedOverTask {
  std::uint64_t task_id = 0;
  std::string runner;
  Json handle;  // the runner's own, as its detach returned it
  // What the task holds (the Backend's record), held again by the next program.
  int cpus = 0;
  std::map<std::string, std::vector<std::string>> resources;
};

// Runs tasks through runner plugins. Status reports go to its TaskStatusSink.
class Executor {
 public:
  virtual ~Executor() = default;
  // Starts a task. On failure to even start it (unknown runner, no task directory, a stuck
  // runner) returns an Error with the reason, and no status event will follow for it. A runner
  // that refuses the task later is reported as a FAILED status event.
  virtual Result<void> launch(const protocol::TaskDescription& task) = 0;
  // Asks the task's runner to stop it. False when the executor does not know the task.
  virtual bool kill(std::uint64_t task_id, bool interrupt, const std::string& reason) = 0;
  // What the task is doing now, or nullopt when unknown.
  virtual std::optional<Json> threadDump(std::uint64_t task_id) = 0;
  // Stops every task and waits (bounded) until their processes are gone. Blocking; called
  // once, on the exit path.
  virtual void stopAll(Millis grace) = 0;
  // A restart in place: hands each running task whose runner can let it outlive the program
  // over to the next program and forgets it (no status follows for it here); returns those,
  // without cpus and resources. The others are left running here, for stopAll(). Blocking,
  // bounded by the runners' call timeout; called once, on the exit path, before stopAll().
  virtual std::vector<HandedOverTask> handOver() { return {}; }
  // In the next program, before the first launch: takes back a task the previous one handed
  // over. Running here on success, as if launched; an error says why it cannot be.
  virtual Result<void> adopt(const HandedOverTask& /*task*/) {
    return Error("this executor cannot take tasks back");
  }
};

// Changes the log level live (spdlog in the real agent).
class LogControl {
 public:
  virtual ~LogControl() = default;
  // False when `level` is not a known level name.
  virtual bool setLevel(std::string_view level) = 0;
};

// The outcome of one migration pass (see Decommissioner).
struct MigrationPassResult {
  // Blocks with a complete, verified copy elsewhere now: where (executor_id, "" for the
  // fallback store) and url. Their local copies are still here until release().
  std::vector<protocol::BlockInfo> moved;
  // Blocks no plugin could move this pass: id and why.
  std::vector<std::pair<std::string, std::string>> failed;
  std::uint64_t bytes_moved = 0;
  std::size_t blocks_left = 0;  // blocks to migrate still held once `moved` are released
  std::uint64_t bytes_left = 0;
  // True when every block to migrate that the store held when the pass started was moved.
  bool complete = false;
};

// How far a running pass has come: what it set out to move and what has a verified copy
// elsewhere so far (reported block by block, before the pass's result).
struct MigrationPassProgress {
  std::size_t blocks_total = 0;
  std::uint64_t bytes_total = 0;
  std::size_t blocks_moved = 0;
  std::uint64_t bytes_moved = 0;
};

// Moves this agent's blocks away when it decommissions (migration plugins, on a thread of
// its own). The Backend drives it: begin() once, then passes, one at a time; after each pass
// it tells the driver where the moved blocks went and only then calls release() to delete
// the local copies, so that no block is ever without a complete copy.
class Decommissioner {
 public:
  virtual ~Decommissioner() = default;
  // False when block migration is off (no plugin, or no kind of block to migrate): the agent
  // then only waits for its tasks.
  virtual bool migrationEnabled() const = 0;
  // Decommissioning starts: refuse blocks pushed by peers from now on.
  virtual void begin() = 0;
  // Starts a pass over the blocks held now; `progress` is posted to the core thread as blocks
  // arrive at their destinations, `done` when the pass ends (no progress after it). At most
  // one pass runs at a time.
  virtual void startPass(std::vector<protocol::Peer> peers,
                         std::function<void(MigrationPassProgress)> progress,
                         std::function<void(MigrationPassResult)> done) = 0;
  // Deletes the local copies of moved blocks (the driver has been told).
  virtual void release(const std::vector<std::string>& block_ids) = 0;
  // The ids of blocks to migrate still held here.
  virtual std::vector<std::string> blocksLeft() const = 0;
  // Asks a running pass to stop early (its result still follows).
  virtual void cancel() = 0;
};

// Ends the process's main loop with an exit code (the real one returns from main()).
class Exiter {
 public:
  virtual ~Exiter() = default;
  virtual void exit(int code) = 0;
};

}  // namespace dockhand::agent
