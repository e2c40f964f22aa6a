// The harness of the Backend's unit tests (backend_*_test.cpp): a Backend wired to the shared
// port fakes (tests/support/fake_ports.h), options and an app config for a typical agent, and
// helpers that drive the bootstrap, deliver driver frames and read back what was sent.
//
// Threading and lifetime: single-threaded; nothing runs until the test calls the Backend or
// answers an ask or advances the fake clock. The fakes are members declared before the
// Backend, so they outlive it and every callback it handed them. Header-only.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/backend.h"
#include "fake_ports.h"
#include "log_capture.h"

namespace dockhand::agent::backend_testing {

namespace proto = dockhand::protocol;
using ::testing::HasSubstr;
using ::testing::Not;
using State = Backend::State;
using fakes::completePass;
using fakes::errorResult;
using fakes::FakeDecommissioner;
using fakes::FakeExecutor;
using fakes::FakeExiter;
using fakes::FakeLink;
using fakes::FakeLogControl;
using fakes::FakeTimers;
using fakes::KillCall;
using fakes::LogCapture;
using fakes::okResult;
using fakes::PendingAsk;
using proto::TaskState;

inline constexpr char kDriverUrl[] = "ws://driver.example:7077/agents";
inline constexpr char kExecutorId[] = "exec-17";
inline constexpr char kAppId[] = "app-20240601-0042";

inline BackendOptions testOptions() {
  BackendOptions o;
  o.driver_url = kDriverUrl;
  o.executor_id = kExecutorId;
  o.hostname = "node-7.example";
  o.cores = 4;
  o.app_id = kAppId;
  o.resource_profile_id = 3;
  o.log_urls = {{"stdout", "http://node-7.example:8081/logs/stdout"},
                {"stderr", "http://node-7.example:8081/logs/stderr"}};
  o.attributes = {{"rack", "r12"}, {"zone", "eu-1b"}};
  o.resources = {{"gpu", proto::ResourceInfo{.name = "gpu", .addresses = {"0", "1"}}}};
  o.block_url = "http://node-7.example:7337/blocks";
  // An agent that exits when its connection drops; backend_resume_test.cpp turns resuming on.
  o.reconnect_timeout = Millis(0);
  return o;
}

inline Json appConfig(std::map<std::string, std::string> properties = {},
                      std::optional<std::string> log_level = std::nullopt,
                      std::string tokens = {}) {
  proto::AppConfig config;
  config.properties = std::move(properties);
  config.log_level = std::move(log_level);
  config.delegation_tokens = std::move(tokens);
  return proto::toJson(config);
}

struct Harness {
  explicit Harness(BackendOptions options = testOptions())
      : backend(std::move(options), link, executor, timers, log_control, exiter, &decommissioner) {}

  // start() and a successful connect: the Backend is then fetching the app config.
  void connect() {
    backend.start();
    link.is_connected = true;
    backend.onDriverConnected();
  }
  void answerAppConfig(const Json& body = appConfig()) {
    link.takeAsk("RetrieveAppConfig").done(okResult(body));
  }
  void acceptRegistration() { link.takeAsk("RegisterExecutor").done(okResult(Json::object())); }
  void runToRunning(const Json& config = appConfig()) {
    connect();
    answerAppConfig(config);
    acceptRegistration();
    ASSERT_EQ(backend.state(), State::kRunning);
  }

  void deliver(const proto::Envelope& frame) { backend.onDriverFrame(frame); }
  template <typename M>
  void deliverMessage(const M& message, std::uint64_t id = 0) {
    backend.onDriverFrame(proto::makeMessage(message, id));
  }
  void launch(std::uint64_t task_id, int cpus = 1,
              std::map<std::string, std::vector<std::string>> resources = {}) {
    proto::LaunchTask msg;
    msg.task.task_id = task_id;
    msg.task.name = "task " + std::to_string(task_id) + " (stage 1.0)";
    msg.task.cpus = cpus;
    msg.task.resources = std::move(resources);
    deliverMessage(msg);
  }
  void kill(std::uint64_t task_id, std::string reason, bool interrupt = false) {
    proto::KillTask msg;
    msg.task_id = task_id;
    msg.executor_id = kExecutorId;
    msg.interrupt = interrupt;
    msg.reason = std::move(reason);
    deliverMessage(msg);
  }
  void report(std::uint64_t task_id, TaskState state, std::string reason = {}) {
    TaskStatusEvent event;
    event.task_id = task_id;
    event.state = state;
    event.reason = std::move(reason);
    backend.onTaskStatus(event);
  }
  std::vector<proto::StatusUpdate> statusUpdates() const {
    std::vector<proto::StatusUpdate> out;
    for (const auto& frame : link.sentOfType("StatusUpdate")) {
      out.push_back(proto::decodeBody<proto::StatusUpdate>(frame.body));
    }
    return out;
  }
  std::vector<proto::RemoveExecutor> removeExecutors() const {
    std::vector<proto::RemoveExecutor> out;
    for (const auto& frame : link.sentOfType("RemoveExecutor")) {
      out.push_back(proto::decodeBody<proto::RemoveExecutor>(frame.body));
    }
    return out;
  }
  // The last frame sent, which must exist.
  const proto::Envelope& lastSent() const {
    static const proto::Envelope kNone;
    if (link.sent.empty()) {
      ADD_FAILURE() << "no frame was sent";
      return kNone;
    }
    return link.sent.back();
  }

  FakeLink link;
  FakeExecutor executor;
  FakeTimers timers;
  FakeLogControl log_control;
  FakeExiter exiter;
  FakeDecommissioner decommissioner;
  Backend backend;
};

inline std::vector<int> exitCodes(std::initializer_list<ExitCode> list) {
  std::vector<int> out;
  for (ExitCode c : list) out.push_back(toInt(c));
  return out;
}

// A block with a copy at `executor_id` ("" for the fallback store).
inline proto::BlockInfo blockAt(std::string id, std::string executor_id, std::uint64_t size = 100) {
  proto::BlockInfo info;
  info.id = std::move(id);
  info.size = size;
  info.checksum = "xxh64:0000000000000001";
  info.executor_id = std::move(executor_id);
  info.url = "http://peer:1/blocks/" + info.id;
  return info;
}

}  // namespace dockhand::agent::backend_testing
