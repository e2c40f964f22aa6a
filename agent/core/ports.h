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
#include <optional>
#include <string>
#include <string_view>

#include "dockhand/protocol/envelope.h"
#include "dockhand/protocol/messages.h"

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
  virtual bool send(protocol::Envelope message) = 0;
  // Sends an ask; `done` runs on the core thread with the reply, or with a timeout or
  // disconnect error. It runs exactly once.
  virtual void ask(protocol::Envelope message, Millis timeout, AskCallback done) = 0;
  // Closes the connection (no disconnect event follows a close the agent asked for).
  virtual void close() = 0;
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
};

// Runs tasks through runner plugins. Status reports are posted to Backend::onTaskStatus().
class Executor {
 public:
  virtual ~Executor() = default;
  // Starts a task. On failure to even start it (unknown runner, no task directory, the
  // runner refused) returns the reason, and no status event will follow for it.
  virtual std::optional<std::string> launch(const protocol::TaskDescription& task) = 0;
  // Asks the task's runner to stop it. False when the executor does not know the task.
  virtual bool kill(std::uint64_t task_id, bool interrupt, const std::string& reason) = 0;
  // What the task is doing now, or nullopt when unknown.
  virtual std::optional<Json> threadDump(std::uint64_t task_id) = 0;
  // Stops every task and waits (bounded) until their processes are gone. Blocking; called
  // once, on the exit path.
  virtual void stopAll(Millis grace) = 0;
};

// Changes the log level live (spdlog in the real agent).
class LogControl {
 public:
  virtual ~LogControl() = default;
  // False when `level` is not a known level name.
  virtual bool setLevel(std::string_view level) = 0;
};

// Ends the process's main loop with an exit code (the real one returns from main()).
class Exiter {
 public:
  virtual ~Exiter() = default;
  virtual void exit(int code) = 0;
};

}  // namespace dockhand::agent
