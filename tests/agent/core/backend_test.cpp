// Unit tests of the agent's core state machine. The Backend acts only through its ports, so
// every port here is a hand-written fake (tests/support/fake_ports.h): a link that records
// frames and holds asks until the test answers them, an executor that records calls, and
// timers on a clock the test moves.
#include "core/backend.h"

#include <algorithm>
#include <deque>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>

#include "fake_ports.h"
#include "log_capture.h"

namespace dockhand::agent {
namespace {

namespace proto = dockhand::protocol;
using ::testing::HasSubstr;
using ::testing::Not;
using State = Backend::State;
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

constexpr char kDriverUrl[] = "ws://driver.example:7077/agents";
constexpr char kExecutorId[] = "exec-17";
constexpr char kAppId[] = "app-20240601-0042";

// ---- Harness -------------------------------------------------------------------------------

BackendOptions testOptions() {
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
  o.resources = {{"gpu", proto::ResourceInfo{"gpu", {"0", "1"}}}};
  o.block_url = "http://node-7.example:7337/blocks";
  return o;
}

Json appConfig(std::map<std::string, std::string> properties = {},
               std::optional<std::string> log_level = std::nullopt, std::string tokens = {}) {
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

std::vector<int> exitCodes(std::initializer_list<ExitCode> list) {
  std::vector<int> out;
  for (ExitCode c : list) out.push_back(toInt(c));
  return out;
}

// ---- Bootstrap -----------------------------------------------------------------------------

TEST(BackendTest, StartConnectsToDriver) {
  Harness h;
  EXPECT_EQ(h.backend.state(), State::kIdle);
  h.backend.start();
  EXPECT_EQ(h.link.connect_calls, 1);
  EXPECT_EQ(h.backend.state(), State::kConnecting);
  h.backend.start();
  EXPECT_EQ(h.link.connect_calls, 1) << "a second start() must not connect again";
}

TEST(BackendTest, ConnectFailureIsRetriedThenExitsBootstrapFailedNamingUrl) {
  BackendOptions options = testOptions();
  options.connect_retry_delay = Millis(1000);
  Harness h(options);
  LogCapture log;
  h.backend.start();

  h.backend.onDriverConnectFailed("connection refused", /*retryable=*/true);
  h.timers.advance(Millis(999));
  EXPECT_EQ(h.link.connect_calls, 1) << "retried before the retry delay";
  h.timers.advance(Millis(10000));
  EXPECT_EQ(h.link.connect_calls, 2);

  h.backend.onDriverConnectFailed("connection refused", /*retryable=*/true);
  h.timers.advance(Millis(999));
  EXPECT_EQ(h.link.connect_calls, 2);
  h.timers.advance(Millis(10000));
  EXPECT_EQ(h.link.connect_calls, 3);
  EXPECT_TRUE(h.exiter.codes.empty());

  h.backend.onDriverConnectFailed("connection refused", /*retryable=*/true);
  h.timers.advance(Millis(60000));
  EXPECT_EQ(h.link.connect_calls, 3) << "connect_tries is 3";
  EXPECT_EQ(h.exiter.codes, exitCodes({ExitCode::kBootstrapFailed}));
  EXPECT_THAT(log.text(), HasSubstr(kDriverUrl));
  EXPECT_THAT(log.text(), HasSubstr("connection refused"));
  EXPECT_TRUE(h.link.attempted.empty()) << "nothing can be sent without a connection";
}

TEST(BackendTest, NonRetryableConnectFailureExitsAtOnce) {
  Harness h;
  h.backend.start();
  h.backend.onDriverConnectFailed("protocol version 2 not supported", /*retryable=*/false);
  h.timers.advance(Millis(0));
  EXPECT_EQ(h.exiter.codes, exitCodes({ExitCode::kBootstrapFailed}));
  h.timers.advance(Millis(60000));
  EXPECT_EQ(h.link.connect_calls, 1);
}

TEST(BackendTest, AuthFailureExitsAtOnceWithItsOwnCode) {
  Harness h;
  h.backend.start();
  h.backend.onDriverAuthFailed("the driver's proof does not match this agent's secret");
  h.timers.advance(Millis(60000));
  EXPECT_EQ(h.exiter.codes, exitCodes({ExitCode::kAuthFailed}));
  EXPECT_EQ(h.link.connect_calls, 1) << "an authentication failure is not retried";
}

TEST(BackendTest, ConnectedAsksForAppConfigWithResourceProfileId) {
  BackendOptions options = testOptions();
  options.ask_timeout = Millis(12345);
  Harness h(options);
  h.connect();
  EXPECT_EQ(h.backend.state(), State::kFetchingConfig);
  ASSERT_EQ(h.link.asks.size(), 1u);
  const PendingAsk& ask = h.link.asks.front();
  EXPECT_EQ(ask.message.type, "RetrieveAppConfig");
  EXPECT_EQ(ask.timeout, Millis(12345));
  EXPECT_EQ(proto::decodeBody<proto::RetrieveAppConfig>(ask.message.body).resource_profile_id, 3);
}

TEST(BackendTest, AppConfigAppliesLogLevelAndProperties) {
  Harness h;
  h.connect();
  h.answerAppConfig(
      appConfig({{"spark.app.name", "etl"}, {"dockhand.task.dir", "/srv/t"}}, "debug"));
  EXPECT_EQ(h.log_control.levels, std::vector<std::string>{"debug"});
  const auto& props = h.backend.properties();
  EXPECT_EQ(props.at("spark.app.name"), "etl");
  EXPECT_EQ(props.at("dockhand.task.dir"), "/srv/t");
  EXPECT_EQ(props.at("dockhand.app.id"), kAppId);
  EXPECT_EQ(h.backend.state(), State::kRegistering);
  EXPECT_FALSE(h.backend.hasDelegationTokens());
}

TEST(BackendTest, UnknownLogLevelInAppConfigIsIgnored) {
  Harness h;
  h.connect();
  h.answerAppConfig(appConfig({}, "chatty"));
  EXPECT_EQ(h.log_control.levels, std::vector<std::string>{"chatty"});
  EXPECT_EQ(h.backend.state(), State::kRegistering);
  EXPECT_TRUE(h.exiter.codes.empty());
}

TEST(BackendTest, DelegationTokensAreKeptButNeverLoggedOrSent) {
  const std::string first_secret = "SECRET-TOKEN-a1b2c3d4e5f6";
  const std::string second_secret = "SECRET-TOKEN-zz998877";
  Harness h;
  LogCapture log;
  h.runToRunning(appConfig({}, std::nullopt, first_secret));
  EXPECT_TRUE(h.backend.hasDelegationTokens());

  proto::UpdateDelegationTokens update;
  update.tokens = second_secret;
  h.deliverMessage(update);
  EXPECT_TRUE(h.backend.hasDelegationTokens());

  // Exercise the rest of the life cycle so that every log line and frame gets a chance to leak.
  h.launch(1);
  h.report(1, TaskState::kFinished);
  h.timers.advance(h.backend.heartbeatInterval());
  h.backend.onStopRequested("SIGTERM");
  h.timers.advance(Millis(0));

  for (const std::string& secret : {first_secret, second_secret}) {
    EXPECT_THAT(log.text(), Not(HasSubstr(secret)));
    EXPECT_THAT(h.link.wireText(), Not(HasSubstr(secret)));
    EXPECT_THAT(h.backend.properties(),
                Not(::testing::Contains(::testing::Pair(::testing::_, HasSubstr(secret)))));
  }
}

TEST(BackendTest, AppConfigSetsHeartbeatIntervalAndDriverTimeout) {
  Harness h;
  h.runToRunning(appConfig(
      {{"dockhand.heartbeat.interval_ms", "2500"}, {"dockhand.driver.timeout_ms", "9000"}}));
  EXPECT_EQ(h.backend.heartbeatInterval(), Millis(2500));
  EXPECT_EQ(h.backend.driverTimeout(), Millis(9000));

  h.timers.advance(Millis(2499));
  EXPECT_TRUE(h.link.sentOfType("Heartbeat").empty());
  h.timers.advance(Millis(1));
  EXPECT_EQ(h.link.sentOfType("Heartbeat").size(), 1u);
}

TEST(BackendTest, InvalidHeartbeatAndTimeoutPropertiesAreIgnored) {
  for (const char* bad : {"", "abc", "0", "-5", "10ms", "1.5", "99999999999999999999"}) {
    SCOPED_TRACE(std::string("value '") + bad + "'");
    Harness h;
    h.runToRunning(
        appConfig({{"dockhand.heartbeat.interval_ms", bad}, {"dockhand.driver.timeout_ms", bad}}));
    EXPECT_EQ(h.backend.heartbeatInterval(), testOptions().heartbeat_interval);
    EXPECT_EQ(h.backend.driverTimeout(), testOptions().driver_timeout);
    EXPECT_TRUE(h.exiter.codes.empty());
  }
}

TEST(BackendTest, AppConfigTimeoutExitsBootstrapFailed) {
  Harness h;
  h.connect();
  h.link.takeAsk("RetrieveAppConfig")
      .done(errorResult(proto::error_code::kTimeout, "no reply within 30000 ms"));
  h.timers.advance(Millis(0));
  EXPECT_EQ(h.exiter.codes, exitCodes({ExitCode::kBootstrapFailed}));
  EXPECT_TRUE(h.link.asks.empty()) << "must not register without an app config";
  EXPECT_EQ(h.link.attemptedOfType("RemoveExecutor"), 0u);
}

TEST(BackendTest, AppConfigRefusalExitsBootstrapFailed) {
  Harness h;
  h.connect();
  h.link.takeAsk("RetrieveAppConfig")
      .done(errorResult(proto::error_code::kInternal, "no such resource profile 3"));
  h.timers.advance(Millis(0));
  EXPECT_EQ(h.exiter.codes, exitCodes({ExitCode::kBootstrapFailed}));
}

TEST(BackendTest, InvalidAppConfigBodyExitsBootstrapFailed) {
  const std::vector<Json> bad_bodies = {
      Json{{"properties", {{"spark.app.name", 5}}}},
      Json{{"properties", "not an object"}},
      Json{{"log_level", 3}},
      Json::array({1, 2}),
      Json("config"),
  };
  for (const Json& body : bad_bodies) {
    SCOPED_TRACE(body.dump());
    Harness h;
    LogCapture log;
    h.connect();
    h.answerAppConfig(body);
    h.timers.advance(Millis(0));
    EXPECT_EQ(h.exiter.codes, exitCodes({ExitCode::kBootstrapFailed}));
    EXPECT_TRUE(h.link.asks.empty());
    EXPECT_THAT(log.text(), HasSubstr("invalid app config"));
  }
}

// ---- Registration --------------------------------------------------------------------------

TEST(BackendTest, RegisterExecutorCarriesIdentityAndResources) {
  Harness h;
  h.connect();
  h.answerAppConfig();
  ASSERT_EQ(h.link.asks.size(), 1u);
  ASSERT_EQ(h.link.asks.front().message.type, "RegisterExecutor");
  auto reg = proto::decodeBody<proto::RegisterExecutor>(h.link.asks.front().message.body);
  const BackendOptions expected = testOptions();
  EXPECT_EQ(reg.executor_id, kExecutorId);
  EXPECT_EQ(reg.hostname, "node-7.example");
  EXPECT_EQ(reg.cores, 4);
  EXPECT_EQ(reg.log_urls, expected.log_urls);
  EXPECT_EQ(reg.attributes, expected.attributes);
  ASSERT_EQ(reg.resources.count("gpu"), 1u);
  EXPECT_EQ(reg.resources.at("gpu").addresses, (std::vector<std::string>{"0", "1"}));
  EXPECT_EQ(reg.resource_profile_id, 3);
  EXPECT_EQ(reg.block_url, expected.block_url);
}

TEST(BackendTest, AcceptedRegistrationRunsAndSendsLaunchedExecutor) {
  Harness h;
  h.runToRunning();
  auto launched = h.link.sentOfType("LaunchedExecutor");
  ASSERT_EQ(launched.size(), 1u);
  EXPECT_EQ(proto::decodeBody<proto::LaunchedExecutor>(launched[0].body).executor_id, kExecutorId);
  EXPECT_TRUE(h.exiter.codes.empty());
}

TEST(BackendTest, RefusedRegistrationExitsRegistrationRefused) {
  Harness h;
  LogCapture log;
  h.connect();
  h.answerAppConfig();
  h.link.takeAsk("RegisterExecutor")
      .done(errorResult(proto::error_code::kDuplicateExecutor, "executor exec-17 already exists"));
  h.timers.advance(Millis(0));
  EXPECT_EQ(h.exiter.codes, exitCodes({ExitCode::kRegistrationRefused}));
  EXPECT_TRUE(h.link.sentOfType("LaunchedExecutor").empty());
  EXPECT_EQ(h.link.attemptedOfType("RemoveExecutor"), 0u);
  EXPECT_THAT(log.text(), HasSubstr("duplicate_executor"));
}

TEST(BackendTest, RegistrationTimeoutExitsBootstrapFailed) {
  for (std::string_view code : {proto::error_code::kTimeout, proto::error_code::kDisconnected}) {
    SCOPED_TRACE(std::string(code));
    Harness h;
    h.connect();
    h.answerAppConfig();
    h.link.takeAsk("RegisterExecutor").done(errorResult(code, "no answer"));
    h.timers.advance(Millis(0));
    EXPECT_EQ(h.exiter.codes, exitCodes({ExitCode::kBootstrapFailed}));
    EXPECT_TRUE(h.link.sentOfType("LaunchedExecutor").empty());
  }
}

// ---- Tasks ---------------------------------------------------------------------------------

TEST(BackendTest, LaunchTaskBeforeRegistrationIsProtocolViolation) {
  Harness h;
  h.connect();
  h.answerAppConfig();  // now registering
  h.launch(1);
  h.timers.advance(Millis(0));
  EXPECT_EQ(h.exiter.codes, exitCodes({ExitCode::kProtocolViolation}));
  EXPECT_TRUE(h.executor.launched.empty());
  auto removes = h.removeExecutors();
  ASSERT_EQ(removes.size(), 1u);
  EXPECT_EQ(removes[0].executor_id, kExecutorId);
  EXPECT_THAT(removes[0].reason, HasSubstr("LaunchTask before the executor was registered"));
}

TEST(BackendTest, KillTaskBeforeRegistrationIsProtocolViolation) {
  Harness h;
  h.connect();  // fetching the app config
  h.kill(1, "stage cancelled");
  h.timers.advance(Millis(0));
  EXPECT_EQ(h.exiter.codes, exitCodes({ExitCode::kProtocolViolation}));
  EXPECT_TRUE(h.executor.kills.empty());
  auto removes = h.removeExecutors();
  ASSERT_EQ(removes.size(), 1u);
  EXPECT_THAT(removes[0].reason, HasSubstr("KillTask before the executor was registered"));
}

TEST(BackendTest, LaunchTaskWhenRunningLaunchesOnExecutor) {
  Harness h;
  h.runToRunning();
  proto::LaunchTask msg;
  msg.task.task_id = 42;
  msg.task.attempt = 2;
  msg.task.name = "task 3.2 in stage 7.0";
  msg.task.runner = "container";
  msg.task.cpus = 2;
  msg.task.payload = Json{{"image", "busybox"}};
  h.deliverMessage(msg);

  ASSERT_EQ(h.executor.launched.size(), 1u);
  const proto::TaskDescription& task = h.executor.launched[0];
  EXPECT_EQ(task.task_id, 42u);
  EXPECT_EQ(task.attempt, 2);
  EXPECT_EQ(task.runner, "container");
  EXPECT_EQ(task.cpus, 2);
  EXPECT_EQ(task.payload, (Json{{"image", "busybox"}}));
  EXPECT_EQ(h.backend.runningTasks(), 1u);
  EXPECT_TRUE(h.statusUpdates().empty()) << "the runner reports RUNNING, not the backend";
}

TEST(BackendTest, LaunchErrorReportsFailedWithReason) {
  Harness h;
  h.runToRunning();
  h.executor.launch_errors[5] = "no runner named 'gpu-docker' is loaded";
  h.launch(5, /*cpus=*/3, {{"gpu", {"1"}}});

  auto updates = h.statusUpdates();
  ASSERT_EQ(updates.size(), 1u);
  EXPECT_EQ(updates[0].task_id, 5u);
  EXPECT_EQ(updates[0].executor_id, kExecutorId);
  EXPECT_EQ(updates[0].state, TaskState::kFailed);
  EXPECT_EQ(updates[0].reason, "no runner named 'gpu-docker' is loaded");
  EXPECT_EQ(updates[0].cpus, 3);
  EXPECT_EQ(updates[0].resources.at("gpu"), std::vector<std::string>{"1"});
  EXPECT_EQ(h.backend.runningTasks(), 0u);
  EXPECT_EQ(h.backend.lastTaskFinish(), h.timers.now());
  EXPECT_EQ(h.backend.state(), State::kRunning);
}

TEST(BackendTest, DuplicateRunningTaskIdIsRefusedWithoutSecondLaunch) {
  Harness h;
  h.runToRunning();
  h.launch(9);
  proto::LaunchTask again;
  again.task.task_id = 9;

  h.deliverMessage(again, /*id=*/31);
  const proto::Envelope& reply = h.lastSent();
  EXPECT_TRUE(reply.isReply());
  EXPECT_EQ(reply.re, 31u);
  EXPECT_FALSE(reply.ok);
  ASSERT_TRUE(reply.error.has_value());
  EXPECT_EQ(reply.error->code, proto::error_code::kUnexpectedMessage);
  EXPECT_THAT(reply.error->message, HasSubstr("9"));

  h.deliverMessage(again);
  EXPECT_TRUE(h.lastSent().isError());

  EXPECT_EQ(h.executor.launchCount(9), 1u);
  EXPECT_EQ(h.backend.runningTasks(), 1u);
  EXPECT_TRUE(h.statusUpdates().empty());
}

TEST(BackendTest, KillTaskForRunningTaskKillsOnExecutor) {
  Harness h;
  h.runToRunning();
  h.launch(11);
  h.launch(12);
  h.kill(11, "stage 4 cancelled", /*interrupt=*/true);
  h.kill(12, "", /*interrupt=*/false);

  ASSERT_EQ(h.executor.kills.size(), 2u);
  EXPECT_EQ(h.executor.kills[0].task_id, 11u);
  EXPECT_TRUE(h.executor.kills[0].interrupt);
  EXPECT_EQ(h.executor.kills[0].reason, "stage 4 cancelled");
  EXPECT_EQ(h.executor.kills[1].task_id, 12u);
  EXPECT_FALSE(h.executor.kills[1].interrupt);
  EXPECT_FALSE(h.executor.kills[1].reason.empty()) << "a kill without a reason still gets one";
  EXPECT_EQ(h.backend.rememberedKills(), 0u);
  EXPECT_EQ(h.backend.runningTasks(), 2u) << "a task ends when its runner says so";
}

TEST(BackendTest, KillBeforeLaunchStopsTheLaunchAndReportsKilled) {
  Harness h;
  h.runToRunning();
  h.kill(7, "another attempt finished first", /*interrupt=*/true);
  EXPECT_EQ(h.backend.rememberedKills(), 1u);
  EXPECT_TRUE(h.executor.kills.empty());

  h.launch(7, /*cpus=*/2);
  EXPECT_TRUE(h.executor.launched.empty());
  auto updates = h.statusUpdates();
  ASSERT_EQ(updates.size(), 1u);
  EXPECT_EQ(updates[0].task_id, 7u);
  EXPECT_EQ(updates[0].state, TaskState::kKilled);
  EXPECT_EQ(updates[0].reason, "another attempt finished first");
  EXPECT_EQ(updates[0].cpus, 2);
  EXPECT_EQ(h.backend.rememberedKills(), 0u);
  EXPECT_EQ(h.backend.runningTasks(), 0u);
}

TEST(BackendTest, RememberedKillIsHonouredUntilItExpires) {
  BackendOptions options = testOptions();
  options.kill_memory = Millis(1000);
  Harness h(options);
  h.runToRunning();
  h.kill(7, "cancelled");
  h.timers.advance(Millis(999));
  h.launch(7);
  EXPECT_TRUE(h.executor.launched.empty());
  ASSERT_EQ(h.statusUpdates().size(), 1u);
  EXPECT_EQ(h.statusUpdates()[0].state, TaskState::kKilled);
}

TEST(BackendTest, RememberedKillExpiresAfterKillMemory) {
  BackendOptions options = testOptions();
  options.kill_memory = Millis(1000);
  options.heartbeat_interval = Millis(30000);  // no heartbeat prunes in between
  Harness h(options);
  h.runToRunning();
  h.kill(7, "cancelled");
  h.timers.advance(Millis(1001));
  h.launch(7);
  EXPECT_EQ(h.executor.launchCount(7), 1u) << "an expired kill must not stop a later launch";
  EXPECT_TRUE(h.statusUpdates().empty());
  EXPECT_EQ(h.backend.runningTasks(), 1u);
  EXPECT_EQ(h.backend.rememberedKills(), 0u);
}

TEST(BackendTest, HeartbeatForgetsExpiredKills) {
  BackendOptions options = testOptions();
  options.kill_memory = Millis(1000);
  options.heartbeat_interval = Millis(500);
  Harness h(options);
  h.runToRunning();
  h.kill(7, "cancelled");
  h.kill(8, "cancelled");
  h.timers.advance(Millis(500));
  EXPECT_EQ(h.backend.rememberedKills(), 2u);
  h.timers.advance(Millis(1000));
  EXPECT_EQ(h.backend.rememberedKills(), 0u);
}

TEST(BackendTest, RememberedKillsAreBounded) {
  BackendOptions options = testOptions();
  options.max_remembered_kills = 3;
  Harness h(options);
  h.runToRunning();
  for (std::uint64_t id = 1; id <= 5; ++id) {
    h.kill(id, "cancelled " + std::to_string(id));
    h.timers.advance(Millis(1));
    EXPECT_LE(h.backend.rememberedKills(), 3u);
  }
  EXPECT_EQ(h.backend.rememberedKills(), 3u);

  // The oldest kills were forgotten: their launches run. The newest three still stop theirs.
  for (std::uint64_t id = 1; id <= 5; ++id) h.launch(id);
  EXPECT_EQ(h.executor.launchCount(1), 1u);
  EXPECT_EQ(h.executor.launchCount(2), 1u);
  std::set<std::uint64_t> killed;
  for (const auto& u : h.statusUpdates()) {
    EXPECT_EQ(u.state, TaskState::kKilled);
    EXPECT_EQ(u.reason, "cancelled " + std::to_string(u.task_id));
    killed.insert(u.task_id);
  }
  EXPECT_EQ(killed, (std::set<std::uint64_t>{3, 4, 5}));
}

TEST(BackendTest, KillLaunchStormLetsNoTaskEscapeItsKill) {
  Harness h;
  h.runToRunning();
  constexpr std::uint64_t kTasks = 1000;
  struct Event {
    std::uint64_t task_id = 0;
    bool launch = false;
  };
  std::vector<Event> events;
  for (std::uint64_t id = 1; id <= kTasks; ++id) {
    events.push_back(Event{id, true});
    events.push_back(Event{id, false});
  }
  std::mt19937 rng(20240601);
  std::shuffle(events.begin(), events.end(), rng);

  std::set<std::uint64_t> seen;
  std::set<std::uint64_t> kill_first;
  for (const Event& e : events) {
    if (seen.insert(e.task_id).second && !e.launch) kill_first.insert(e.task_id);
    if (e.launch) {
      h.launch(e.task_id);
    } else {
      h.kill(e.task_id, "storm kill " + std::to_string(e.task_id), /*interrupt=*/true);
    }
  }
  ASSERT_GT(kill_first.size(), kTasks / 10) << "the shuffle must exercise both orders";
  ASSERT_LT(kill_first.size(), kTasks - kTasks / 10);

  std::map<std::uint64_t, std::size_t> executor_kills;
  for (const KillCall& k : h.executor.kills) {
    ++executor_kills[k.task_id];
    EXPECT_TRUE(k.interrupt);
    EXPECT_EQ(k.reason, "storm kill " + std::to_string(k.task_id));
  }
  std::map<std::uint64_t, proto::StatusUpdate> reported;
  for (const auto& u : h.statusUpdates()) {
    EXPECT_TRUE(reported.emplace(u.task_id, u).second) << "task " << u.task_id << " twice";
  }
  for (std::uint64_t id = 1; id <= kTasks; ++id) {
    SCOPED_TRACE("task " + std::to_string(id));
    if (kill_first.count(id) != 0) {
      EXPECT_EQ(h.executor.launchCount(id), 0u) << "launched after its kill";
      ASSERT_EQ(reported.count(id), 1u);
      EXPECT_EQ(reported.at(id).state, TaskState::kKilled);
      EXPECT_EQ(reported.at(id).reason, "storm kill " + std::to_string(id));
    } else {
      EXPECT_EQ(h.executor.launchCount(id), 1u);
      EXPECT_EQ(executor_kills[id], 1u) << "launched task escaped its kill";
      EXPECT_EQ(reported.count(id), 0u);
    }
  }
  EXPECT_EQ(h.backend.rememberedKills(), 0u);
  EXPECT_EQ(h.backend.runningTasks(), kTasks - kill_first.size());

  // The runners report the kills; nothing is left running.
  for (std::uint64_t id = 1; id <= kTasks; ++id) {
    if (kill_first.count(id) == 0) h.report(id, TaskState::kKilled, "killed");
  }
  EXPECT_EQ(h.backend.runningTasks(), 0u);
  EXPECT_EQ(h.statusUpdates().size(), static_cast<std::size_t>(kTasks));
}

// ---- Status updates ------------------------------------------------------------------------

TEST(BackendTest, StatusUpdatesGoOutInOrderWithTaskCpusAndResources) {
  Harness h;
  h.runToRunning();
  h.launch(3, /*cpus=*/2, {{"gpu", {"0", "1"}}});

  h.report(3, TaskState::kRunning);
  EXPECT_EQ(h.backend.runningTasks(), 1u);
  EXPECT_FALSE(h.backend.lastTaskFinish().has_value());

  h.timers.advance(Millis(250));
  TaskStatusEvent done;
  done.task_id = 3;
  done.state = TaskState::kFinished;
  done.result = Json{{"rows", 1234}};
  h.backend.onTaskStatus(done);

  auto updates = h.statusUpdates();
  ASSERT_EQ(updates.size(), 2u);
  EXPECT_EQ(updates[0].state, TaskState::kRunning);
  EXPECT_EQ(updates[1].state, TaskState::kFinished);
  for (const auto& u : updates) {
    EXPECT_EQ(u.executor_id, kExecutorId);
    EXPECT_EQ(u.task_id, 3u);
    EXPECT_EQ(u.cpus, 2);
    EXPECT_EQ(u.resources.at("gpu"), (std::vector<std::string>{"0", "1"}));
  }
  EXPECT_EQ(updates[1].result, (Json{{"rows", 1234}}));
  EXPECT_EQ(h.backend.runningTasks(), 0u);
  EXPECT_EQ(h.backend.lastTaskFinish(), h.timers.now());
}

TEST(BackendTest, FailedStatusCarriesExitCodeSignalAndStderr) {
  Harness h;
  h.runToRunning();
  h.launch(4);
  TaskStatusEvent failed;
  failed.task_id = 4;
  failed.state = TaskState::kFailed;
  failed.reason = "process killed by signal 9";
  failed.exit_code = 137;
  failed.signal = 9;
  failed.stderr_tail = "Killed\n";
  h.backend.onTaskStatus(failed);

  auto updates = h.statusUpdates();
  ASSERT_EQ(updates.size(), 1u);
  EXPECT_EQ(updates[0].state, TaskState::kFailed);
  EXPECT_EQ(updates[0].reason, "process killed by signal 9");
  EXPECT_EQ(updates[0].exit_code, 137);
  EXPECT_EQ(updates[0].signal, 9);
  EXPECT_EQ(updates[0].stderr_tail, "Killed\n");
  EXPECT_EQ(h.backend.runningTasks(), 0u);
  h.report(4, TaskState::kFinished);
  EXPECT_EQ(h.statusUpdates().size(), 1u) << "a task ends once";
}

TEST(BackendTest, StatusForUnknownTaskIsIgnored) {
  Harness h;
  h.runToRunning();
  h.report(99, TaskState::kFinished);
  h.report(99, TaskState::kRunning);
  EXPECT_TRUE(h.statusUpdates().empty());
  EXPECT_FALSE(h.backend.lastTaskFinish().has_value());
  EXPECT_EQ(h.backend.state(), State::kRunning);
}

TEST(BackendTest, StatusUpdatesQueueWhileSendFailsAndFlushInOrderOnHeartbeat) {
  Harness h;
  h.runToRunning();
  for (std::uint64_t id = 1; id <= 4; ++id) h.launch(id);

  h.link.send_ok = false;
  h.report(1, TaskState::kFinished);
  EXPECT_EQ(h.backend.queuedStatusUpdates(), 1u);
  h.timers.advance(h.backend.heartbeatInterval());  // still failing: nothing is lost
  EXPECT_EQ(h.backend.queuedStatusUpdates(), 1u);

  h.link.send_ok = true;
  h.report(2, TaskState::kFailed, "exit code 1");
  h.report(3, TaskState::kRunning);
  EXPECT_EQ(h.backend.queuedStatusUpdates(), 3u) << "later updates must queue behind earlier ones";
  EXPECT_TRUE(h.statusUpdates().empty());

  h.timers.advance(h.backend.heartbeatInterval());
  EXPECT_EQ(h.backend.queuedStatusUpdates(), 0u);
  h.report(4, TaskState::kFinished);
  auto updates = h.statusUpdates();
  ASSERT_EQ(updates.size(), 4u);
  EXPECT_EQ(updates[0].task_id, 1u);
  EXPECT_EQ(updates[1].task_id, 2u);
  EXPECT_EQ(updates[1].reason, "exit code 1");
  EXPECT_EQ(updates[2].task_id, 3u);
  EXPECT_EQ(updates[3].task_id, 4u);
}

TEST(BackendTest, StatusUpdatesQueueWhileLinkIsDown) {
  Harness h;
  h.runToRunning();
  h.launch(1);
  h.launch(2);
  h.link.is_connected = false;
  h.report(1, TaskState::kFinished);
  h.report(2, TaskState::kFinished);
  EXPECT_EQ(h.backend.queuedStatusUpdates(), 2u);
  EXPECT_EQ(h.link.attemptedOfType("StatusUpdate"), 0u) << "nothing is sent while down";

  h.link.is_connected = true;
  h.timers.advance(h.backend.heartbeatInterval());
  auto updates = h.statusUpdates();
  ASSERT_EQ(updates.size(), 2u);
  EXPECT_EQ(updates[0].task_id, 1u);
  EXPECT_EQ(updates[1].task_id, 2u);
}

TEST(BackendTest, UndeliverableStatusUpdatesAreReportedOnExit) {
  Harness h;
  LogCapture log;
  h.runToRunning();
  h.launch(21);
  h.launch(22);
  h.link.send_ok = false;
  h.report(21, TaskState::kFinished);
  h.report(22, TaskState::kKilled, "cancelled");
  h.backend.onStopRequested("SIGTERM");
  EXPECT_EQ(h.backend.queuedStatusUpdates(), 2u);

  h.timers.advance(Millis(0));
  EXPECT_EQ(h.exiter.codes, exitCodes({ExitCode::kSuccess}));
  EXPECT_EQ(h.backend.queuedStatusUpdates(), 2u);
  EXPECT_THAT(log.text(), HasSubstr("2 status update(s) could not be delivered"));
  EXPECT_THAT(log.text(), HasSubstr("21, 22"));
}

TEST(BackendTest, QueuedStatusUpdatesAreFlushedBeforeTheLinkCloses) {
  Harness h;
  h.runToRunning();
  h.launch(1);
  h.link.send_ok = false;
  h.report(1, TaskState::kFinished);
  h.link.send_ok = true;
  h.deliverMessage(proto::StopExecutor{});
  h.timers.advance(Millis(0));
  EXPECT_EQ(h.backend.queuedStatusUpdates(), 0u);
  ASSERT_EQ(h.statusUpdates().size(), 1u);
  EXPECT_EQ(h.link.close_calls, 1);
}

TEST(BackendTest, StatusesOfStoppedTasksAreSentBeforeExit) {
  Harness h;
  h.runToRunning();
  h.launch(1);
  h.deliverMessage(proto::StopExecutor{});
  ASSERT_EQ(h.executor.stop_all_calls.size(), 1u);
  // The stopped task's status arrives as an event queued behind the stop.
  h.report(1, TaskState::kKilled, "executor stopping");
  EXPECT_TRUE(h.exiter.codes.empty());
  h.timers.advance(Millis(0));
  ASSERT_EQ(h.statusUpdates().size(), 1u);
  EXPECT_EQ(h.statusUpdates()[0].state, TaskState::kKilled);
  EXPECT_EQ(h.exiter.codes, exitCodes({ExitCode::kSuccess}));
}

// ---- Commands from the driver --------------------------------------------------------------

TEST(BackendTest, StopExecutorExitsSuccessStoppingTasksWithoutRemoveExecutor) {
  BackendOptions options = testOptions();
  options.stop_grace = Millis(7000);
  Harness h(options);
  h.runToRunning();
  h.launch(1);
  h.launch(2);
  h.deliverMessage(proto::StopExecutor{});
  EXPECT_EQ(h.backend.state(), State::kStopping);
  EXPECT_EQ(h.executor.stop_all_calls, std::vector<Millis>{Millis(7000)});
  h.timers.advance(Millis(0));
  EXPECT_EQ(h.exiter.codes, exitCodes({ExitCode::kSuccess}));
  EXPECT_EQ(h.link.attemptedOfType("RemoveExecutor"), 0u);
  EXPECT_EQ(h.link.close_calls, 1);
}

TEST(BackendTest, StopExecutorWithoutTasksSkipsStopAll) {
  Harness h;
  h.runToRunning();
  h.deliverMessage(proto::StopExecutor{});
  h.timers.advance(Millis(0));
  EXPECT_TRUE(h.executor.stop_all_calls.empty());
  EXPECT_EQ(h.exiter.codes, exitCodes({ExitCode::kSuccess}));
}

TEST(BackendTest, ShutdownWhenRegisteredExitsSuccess) {
  Harness h;
  h.runToRunning();
  h.launch(1);
  h.deliverMessage(proto::Shutdown{});
  h.timers.advance(Millis(0));
  EXPECT_EQ(h.exiter.codes, exitCodes({ExitCode::kSuccess}));
  EXPECT_EQ(h.executor.stop_all_calls.size(), 1u);
  EXPECT_EQ(h.link.attemptedOfType("RemoveExecutor"), 0u);
}

TEST(BackendTest, ShutdownBeforeRegistrationExitsInternalError) {
  Harness h;
  h.connect();
  h.answerAppConfig();  // registering
  h.deliverMessage(proto::Shutdown{});
  h.timers.advance(Millis(0));
  EXPECT_EQ(h.exiter.codes, exitCodes({ExitCode::kInternalError}));
  // A registration reply that still arrives changes nothing.
  h.acceptRegistration();
  EXPECT_EQ(h.backend.state(), State::kStopping);
  EXPECT_TRUE(h.link.sentOfType("LaunchedExecutor").empty());
}

TEST(BackendTest, UpdateExecutorLogLevelSetsLevel) {
  Harness h;
  h.runToRunning();
  std::size_t frames_before = h.link.sent.size();
  h.deliverMessage(proto::UpdateExecutorLogLevel{"warn"}, /*id=*/4);
  EXPECT_EQ(h.log_control.levels, std::vector<std::string>{"warn"});
  EXPECT_EQ(h.link.sent.size(), frames_before) << "no complaint about a valid level";
}

TEST(BackendTest, UnknownLogLevelIsAnsweredWithError) {
  Harness h;
  h.runToRunning();
  h.deliverMessage(proto::UpdateExecutorLogLevel{"loud"}, /*id=*/8);
  const proto::Envelope& reply = h.lastSent();
  EXPECT_TRUE(reply.isReply());
  EXPECT_EQ(reply.re, 8u);
  EXPECT_FALSE(reply.ok);
  ASSERT_TRUE(reply.error.has_value());
  EXPECT_EQ(reply.error->code, proto::error_code::kInvalidBody);
  EXPECT_THAT(reply.error->message, HasSubstr("loud"));

  h.deliverMessage(proto::UpdateExecutorLogLevel{"loud"});
  EXPECT_TRUE(h.lastSent().isError());
  EXPECT_EQ(h.backend.state(), State::kRunning);
}

TEST(BackendTest, UpdateDelegationTokensAreKept) {
  Harness h;
  h.runToRunning();
  EXPECT_FALSE(h.backend.hasDelegationTokens());
  h.deliverMessage(proto::UpdateDelegationTokens{"dG9rZW5z"});
  EXPECT_TRUE(h.backend.hasDelegationTokens());
  EXPECT_EQ(h.backend.state(), State::kRunning);
}

TEST(BackendTest, DecommissionExecutorIsLoggedAndIgnored) {
  Harness h;
  LogCapture log;
  h.runToRunning();
  h.launch(1);
  h.deliverMessage(proto::DecommissionExecutor{"node draining"});
  h.timers.advance(h.backend.heartbeatInterval());
  EXPECT_EQ(h.backend.state(), State::kRunning);
  EXPECT_TRUE(h.exiter.codes.empty());
  EXPECT_TRUE(h.executor.stop_all_calls.empty());
  EXPECT_TRUE(h.executor.kills.empty());
  EXPECT_THAT(log.text(), HasSubstr("decommission"));
}

TEST(BackendTest, TaskThreadDumpRepliesWithExecutorsDump) {
  Harness h;
  h.runToRunning();
  h.launch(4);
  Json dump = {{"pid", 4711}, {"stack", {"main", "read"}}};
  h.executor.dumps[4] = dump;
  h.deliverMessage(proto::TaskThreadDump{4}, /*id=*/55);
  const proto::Envelope& reply = h.lastSent();
  EXPECT_TRUE(reply.isReply());
  EXPECT_EQ(reply.re, 55u);
  EXPECT_TRUE(reply.ok);
  EXPECT_EQ(reply.body, dump);
}

TEST(BackendTest, TaskThreadDumpForUnknownTaskRepliesUnknownTask) {
  Harness h;
  h.runToRunning();
  h.launch(4);  // running, but the executor has no dump for it
  for (std::uint64_t task_id : {4u, 404u}) {
    SCOPED_TRACE("task " + std::to_string(task_id));
    h.deliverMessage(proto::TaskThreadDump{task_id}, /*id=*/60 + task_id);
    const proto::Envelope& reply = h.lastSent();
    EXPECT_TRUE(reply.isReply());
    EXPECT_EQ(reply.re, 60 + task_id);
    EXPECT_FALSE(reply.ok);
    ASSERT_TRUE(reply.error.has_value());
    EXPECT_EQ(reply.error->code, proto::error_code::kUnknownTask);
  }
}

TEST(BackendTest, HelloAskIsAnswered) {
  Harness h;
  h.runToRunning();
  h.deliverMessage(proto::Hello{proto::kProtocolVersion, "driver", "dockhand-driver"}, 3);
  const proto::Envelope& reply = h.lastSent();
  EXPECT_TRUE(reply.isReply());
  EXPECT_EQ(reply.re, 3u);
  EXPECT_TRUE(reply.ok);
  EXPECT_EQ(proto::decodeBody<proto::Hello>(reply.body).role, "agent");
}

// ---- Heartbeats and the driver's silence ---------------------------------------------------

TEST(BackendTest, HeartbeatsGoOutEveryInterval) {
  BackendOptions options = testOptions();
  options.heartbeat_interval = Millis(1000);
  Harness h(options);
  h.runToRunning();
  h.launch(1);
  h.launch(2);
  h.timers.advance(Millis(999));
  EXPECT_TRUE(h.link.sentOfType("Heartbeat").empty());
  h.timers.advance(Millis(1));
  auto beats = h.link.sentOfType("Heartbeat");
  ASSERT_EQ(beats.size(), 1u);
  auto beat = proto::decodeBody<proto::Heartbeat>(beats[0].body);
  EXPECT_EQ(beat.executor_id, kExecutorId);
  EXPECT_EQ(beat.running_tasks, 2);

  h.report(1, TaskState::kFinished);
  h.timers.advance(Millis(1000));
  beats = h.link.sentOfType("Heartbeat");
  ASSERT_EQ(beats.size(), 2u);
  EXPECT_EQ(proto::decodeBody<proto::Heartbeat>(beats[1].body).running_tasks, 1);
}

TEST(BackendTest, NoHeartbeatBeforeRegistration) {
  BackendOptions options = testOptions();
  options.heartbeat_interval = Millis(1000);
  Harness h(options);
  h.connect();
  h.timers.advance(Millis(5000));
  EXPECT_EQ(h.link.attemptedOfType("Heartbeat"), 0u);
}

TEST(BackendTest, SilentDriverIsLostAfterTimeout) {
  BackendOptions options = testOptions();
  options.heartbeat_interval = Millis(1000);
  options.driver_timeout = Millis(3000);
  Harness h(options);
  h.runToRunning();
  h.launch(1);
  h.timers.advance(Millis(3000));
  EXPECT_TRUE(h.exiter.codes.empty()) << "lost before the driver timeout passed";
  h.timers.advance(Millis(1000));
  EXPECT_EQ(h.exiter.codes, exitCodes({ExitCode::kDriverLost}));
  EXPECT_EQ(h.link.attemptedOfType("RemoveExecutor"), 0u);
  EXPECT_EQ(h.executor.stop_all_calls.size(), 1u);

  std::size_t beats = h.link.attemptedOfType("Heartbeat");
  h.timers.advance(Millis(10000));
  EXPECT_EQ(h.link.attemptedOfType("Heartbeat"), beats) << "no heartbeats after exit";
  EXPECT_EQ(h.exiter.codes.size(), 1u);
}

TEST(BackendTest, DriverHeartbeatResetsSilenceClock) {
  BackendOptions options = testOptions();
  options.heartbeat_interval = Millis(1000);
  options.driver_timeout = Millis(3000);
  Harness h(options);
  h.runToRunning();
  for (int i = 0; i < 10; ++i) {
    h.timers.advance(Millis(2500));
    h.deliverMessage(proto::Heartbeat{});
  }
  EXPECT_TRUE(h.exiter.codes.empty());
  EXPECT_EQ(h.backend.state(), State::kRunning);
  h.timers.advance(Millis(4000));
  EXPECT_EQ(h.exiter.codes, exitCodes({ExitCode::kDriverLost}));
}

TEST(BackendTest, FramesFromDriverKeepItAlive) {
  BackendOptions options = testOptions();
  options.heartbeat_interval = Millis(1000);
  options.driver_timeout = Millis(3000);
  Harness h(options);
  h.runToRunning();
  for (std::uint64_t id = 1; id <= 10; ++id) {
    h.timers.advance(Millis(2000));
    if (id % 2 == 0) {
      h.launch(id);
    } else {
      h.deliverMessage(proto::UpdateExecutorLogLevel{"info"});
    }
  }
  EXPECT_TRUE(h.exiter.codes.empty());
  EXPECT_EQ(h.link.sentOfType("Heartbeat").size(), 20u);
}

TEST(BackendTest, AskRepliesCountAsDriverActivity) {
  BackendOptions options = testOptions();
  options.heartbeat_interval = Millis(1000);
  options.driver_timeout = Millis(3000);
  Harness h(options);
  h.connect();
  h.timers.advance(Millis(2900));
  h.answerAppConfig();
  h.timers.advance(Millis(2900));
  h.acceptRegistration();  // the driver spoke just now
  h.timers.advance(Millis(1000));
  EXPECT_TRUE(h.exiter.codes.empty()) << "driver declared silent 1 s after it replied";
  EXPECT_EQ(h.backend.state(), State::kRunning);
  EXPECT_EQ(h.link.sentOfType("Heartbeat").size(), 1u);
}

// ---- Loss of the driver or worker, local stop ----------------------------------------------

TEST(BackendTest, DriverDisconnectWhileRunningExitsDriverLost) {
  Harness h;
  h.runToRunning();
  h.launch(1);
  // The link stays "connected" in the fake so that a RemoveExecutor would be visible.
  h.backend.onDriverDisconnected("connection reset by peer");
  h.timers.advance(Millis(0));
  EXPECT_EQ(h.exiter.codes, exitCodes({ExitCode::kDriverLost}));
  EXPECT_EQ(h.link.attemptedOfType("RemoveExecutor"), 0u);
  EXPECT_EQ(h.executor.stop_all_calls.size(), 1u);
}

TEST(BackendTest, DriverDisconnectWhileStoppingDoesNotExitAgain) {
  Harness h;
  h.runToRunning();
  h.deliverMessage(proto::StopExecutor{});
  h.backend.onDriverDisconnected("closed by driver");
  h.timers.advance(Millis(0));
  h.timers.advance(Millis(60000));
  EXPECT_EQ(h.exiter.codes, exitCodes({ExitCode::kSuccess}));
}

TEST(BackendTest, WorkerLostExitsWorkerLostWithRemoveExecutor) {
  Harness h;
  h.runToRunning();
  h.launch(1);
  h.backend.onWorkerLost("worker ws://worker-3:7078 closed the connection");
  auto removes = h.removeExecutors();
  ASSERT_EQ(removes.size(), 1u);
  EXPECT_EQ(removes[0].executor_id, kExecutorId);
  EXPECT_THAT(removes[0].reason, HasSubstr("worker-3"));
  h.timers.advance(Millis(0));
  EXPECT_EQ(h.exiter.codes, exitCodes({ExitCode::kWorkerLost}));
  EXPECT_EQ(h.executor.stop_all_calls.size(), 1u);
}

TEST(BackendTest, WorkerLostWhileStoppingIsIgnored) {
  Harness h;
  h.runToRunning();
  h.backend.onStopRequested("SIGTERM");
  h.backend.onWorkerLost("worker gone");
  h.timers.advance(Millis(0));
  EXPECT_EQ(h.exiter.codes, exitCodes({ExitCode::kSuccess}));
  EXPECT_EQ(h.removeExecutors().size(), 1u);
}

TEST(BackendTest, StopRequestedExitsSuccessWithRemoveExecutor) {
  Harness h;
  h.runToRunning();
  h.launch(1);
  h.backend.onStopRequested("received SIGTERM");
  auto removes = h.removeExecutors();
  ASSERT_EQ(removes.size(), 1u);
  EXPECT_EQ(removes[0].executor_id, kExecutorId);
  EXPECT_EQ(removes[0].reason, "received SIGTERM");
  EXPECT_EQ(h.executor.stop_all_calls.size(), 1u);
  h.timers.advance(Millis(0));
  EXPECT_EQ(h.exiter.codes, exitCodes({ExitCode::kSuccess}));
}

// ---- The exit path -------------------------------------------------------------------------

TEST(BackendTest, ExitRunsOnceWithTheFirstCode) {
  Harness h;
  h.runToRunning();
  h.launch(1);
  h.backend.exitExecutor(ExitCode::kWorkerLost, "worker lost", /*notify_driver=*/true);
  h.backend.exitExecutor(ExitCode::kDriverLost, "driver lost", /*notify_driver=*/true);
  h.backend.exitExecutor(ExitCode::kSuccess, "stop", /*notify_driver=*/false);
  h.backend.onStopRequested("SIGINT");
  h.timers.advance(Millis(0));
  h.timers.advance(Millis(120000));
  EXPECT_EQ(h.exiter.codes, exitCodes({ExitCode::kWorkerLost}));
  EXPECT_EQ(h.executor.stop_all_calls.size(), 1u);
  EXPECT_EQ(h.removeExecutors().size(), 1u);
  EXPECT_EQ(h.link.close_calls, 1);
}

TEST(BackendTest, ExitHappensOnZeroDelayTimerAndClosesLink) {
  Harness h;
  h.runToRunning();
  h.backend.exitExecutor(ExitCode::kDriverLost, "test", /*notify_driver=*/false);
  EXPECT_EQ(h.backend.state(), State::kStopping);
  EXPECT_TRUE(h.exiter.codes.empty()) << "the exit must wait for queued events";
  EXPECT_EQ(h.link.close_calls, 0);
  h.timers.advance(Millis(0));
  EXPECT_EQ(h.exiter.codes, exitCodes({ExitCode::kDriverLost}));
  EXPECT_EQ(h.link.close_calls, 1);
  EXPECT_FALSE(h.link.is_connected);
}

TEST(BackendTest, LaunchWhileStoppingIsReportedKilled) {
  Harness h;
  h.runToRunning();
  h.backend.onStopRequested("SIGTERM");
  h.launch(5);
  EXPECT_TRUE(h.executor.launched.empty());
  auto updates = h.statusUpdates();
  ASSERT_EQ(updates.size(), 1u);
  EXPECT_EQ(updates[0].task_id, 5u);
  EXPECT_EQ(updates[0].state, TaskState::kKilled);
  h.timers.advance(Millis(0));
  EXPECT_EQ(h.exiter.codes, exitCodes({ExitCode::kSuccess}));
}

// ---- Malformed input -----------------------------------------------------------------------

TEST(BackendTest, UnknownTypeWithIdRepliesUnknownType) {
  Harness h;
  h.runToRunning();
  proto::Envelope frame;
  frame.type = "Frobnicate";
  frame.id = 77;
  frame.body = Json::object();
  h.deliver(frame);
  const proto::Envelope& reply = h.lastSent();
  EXPECT_TRUE(reply.isReply());
  EXPECT_EQ(reply.re, 77u);
  EXPECT_FALSE(reply.ok);
  ASSERT_TRUE(reply.error.has_value());
  EXPECT_EQ(reply.error->code, proto::error_code::kUnknownType);
  EXPECT_THAT(reply.error->message, HasSubstr("Frobnicate"));
  EXPECT_EQ(h.backend.state(), State::kRunning);
}

TEST(BackendTest, UnknownTypeWithoutIdSendsErrorFrame) {
  Harness h;
  h.runToRunning();
  proto::Envelope frame;
  frame.type = "Frobnicate";
  h.deliver(frame);
  const proto::Envelope& error = h.lastSent();
  EXPECT_TRUE(error.isError());
  ASSERT_TRUE(error.error.has_value());
  EXPECT_EQ(error.error->code, proto::error_code::kUnknownType);
  EXPECT_EQ(h.backend.state(), State::kRunning);
}

TEST(BackendTest, LaunchTaskWithoutTaskIdIsInvalidBodyNamingPath) {
  Harness h;
  h.runToRunning();
  proto::Envelope frame;
  frame.type = "LaunchTask";
  frame.body = Json{{"task", {{"name", "no id"}, {"cpus", 1}}}};
  h.deliver(frame);
  const proto::Envelope& error = h.lastSent();
  EXPECT_TRUE(error.isError());
  ASSERT_TRUE(error.error.has_value());
  EXPECT_EQ(error.error->code, proto::error_code::kInvalidBody);
  EXPECT_THAT(error.error->message, HasSubstr("/task/task_id"));
  EXPECT_TRUE(h.executor.launched.empty());

  // The agent keeps running and takes the next good launch.
  h.timers.advance(Millis(0));
  EXPECT_TRUE(h.exiter.codes.empty());
  EXPECT_EQ(h.backend.state(), State::kRunning);
  h.launch(1);
  EXPECT_EQ(h.executor.launchCount(1), 1u);
}

TEST(BackendTest, InvalidBodyOfAnAskIsAnsweredWithReply) {
  Harness h;
  h.runToRunning();
  proto::Envelope frame;
  frame.type = "TaskThreadDump";
  frame.id = 14;
  frame.body = Json{{"task_id", "four"}};
  h.deliver(frame);
  const proto::Envelope& reply = h.lastSent();
  EXPECT_TRUE(reply.isReply());
  EXPECT_EQ(reply.re, 14u);
  ASSERT_TRUE(reply.error.has_value());
  EXPECT_EQ(reply.error->code, proto::error_code::kInvalidBody);
  EXPECT_THAT(reply.error->message, HasSubstr("/task_id"));
}

TEST(BackendTest, AgentToDriverMessageIsUnexpected) {
  Harness h;
  h.runToRunning();
  proto::RegisterExecutor reg;
  reg.executor_id = "someone-else";
  reg.hostname = "h";
  reg.cores = 1;
  h.deliverMessage(reg, /*id=*/90);
  const proto::Envelope& reply = h.lastSent();
  EXPECT_TRUE(reply.isReply());
  EXPECT_EQ(reply.re, 90u);
  ASSERT_TRUE(reply.error.has_value());
  EXPECT_EQ(reply.error->code, proto::error_code::kUnexpectedMessage);

  proto::StatusUpdate update;
  update.executor_id = "someone-else";
  h.deliverMessage(update);
  ASSERT_TRUE(h.lastSent().isError());
  EXPECT_EQ(h.lastSent().error->code, proto::error_code::kUnexpectedMessage);
  EXPECT_EQ(h.backend.state(), State::kRunning);
  EXPECT_TRUE(h.statusUpdates().empty());
}

TEST(BackendTest, ErrorFrameFromDriverIsNotAnswered) {
  Harness h;
  h.runToRunning();
  std::size_t frames_before = h.link.sent.size();
  h.deliver(proto::makeError(proto::error_code::kMalformedFrame, "bad frame from agent"));
  EXPECT_EQ(h.link.sent.size(), frames_before) << "answering an Error invites a ping-pong";
  EXPECT_EQ(h.backend.state(), State::kRunning);
}

// ---- Decommission -------------------------------------------------------------------------

proto::BlockInfo blockAt(std::string id, std::string executor_id, std::uint64_t size = 100) {
  proto::BlockInfo info;
  info.id = std::move(id);
  info.size = size;
  info.checksum = "xxh64:0000000000000001";
  info.executor_id = std::move(executor_id);
  info.url = "http://peer:1/blocks/" + info.id;
  return info;
}

MigrationPassResult completePass(std::vector<proto::BlockInfo> moved = {}) {
  MigrationPassResult result;
  for (const auto& b : moved) result.bytes_moved += b.size;
  result.moved = std::move(moved);
  result.complete = true;
  return result;
}

BackendOptions decommissionOptions() {
  BackendOptions o = testOptions();
  o.decommission.check_interval = Millis(1000);
  return o;
}

void answerPeers(Harness& h) {
  h.link.takeAsk("GetPeers")
      .done(okResult(proto::toJson(std::vector<proto::Peer>{{"exec-2", "http://peer:1"}})));
}

TEST(BackendDecommissionTest, SignalAsksTheDriverThenDecommissions) {
  Harness h(decommissionOptions());
  h.runToRunning();
  h.backend.onDecommissionSignal();
  EXPECT_FALSE(h.backend.decommissioning()) << "not before the driver answered";
  PendingAsk ask = h.link.takeAsk("ExecutorDecommissioning");
  EXPECT_EQ(proto::decodeBody<proto::ExecutorDecommissioning>(ask.message.body).executor_id,
            kExecutorId);
  ask.done(okResult(Json{{"accepted", true}}));
  EXPECT_TRUE(h.backend.decommissioning());
  EXPECT_EQ(h.decommissioner.begins, 1);
  PendingAsk peers = h.link.takeAsk("GetPeers");
  EXPECT_EQ(proto::decodeBody<proto::GetPeers>(peers.message.body).executor_id, kExecutorId);
}

TEST(BackendDecommissionTest, DriverThatDoesNotAcceptLeavesTheAgentRunning) {
  Harness h(decommissionOptions());
  h.runToRunning();
  h.backend.onDecommissionSignal();
  h.link.takeAsk("ExecutorDecommissioning").done(okResult(Json{{"accepted", false}}));
  EXPECT_FALSE(h.backend.decommissioning());
  h.launch(3);
  EXPECT_EQ(h.executor.launchCount(3), 1u);
}

TEST(BackendDecommissionTest, LaunchTaskWhileDecommissioningIsLostNotStarted) {
  Harness h(decommissionOptions());
  h.runToRunning();
  h.deliverMessage(proto::DecommissionExecutor{"scale down"});
  ASSERT_TRUE(h.backend.decommissioning());
  h.launch(5);
  EXPECT_EQ(h.executor.launchCount(5), 0u);
  auto updates = h.statusUpdates();
  ASSERT_EQ(updates.size(), 1u);
  EXPECT_EQ(updates[0].task_id, 5u);
  EXPECT_EQ(updates[0].state, TaskState::kLost);
  EXPECT_EQ(updates[0].reason, "executor exec-17 is decommissioning");
}

TEST(BackendDecommissionTest, WaitsForRunningTasksThenExitsZeroAfterACompletePass) {
  Harness h(decommissionOptions());
  h.runToRunning();
  h.launch(1);
  h.deliverMessage(proto::DecommissionExecutor{});
  answerPeers(h);
  ASSERT_EQ(h.decommissioner.passes.size(), 1u);
  EXPECT_EQ(h.decommissioner.passes[0].peers.size(), 1u);
  // The first pass ends while the task still runs: no exit, however long.
  h.decommissioner.finishPass(completePass());
  h.timers.advance(Millis(5000));
  EXPECT_TRUE(h.exiter.codes.empty());
  EXPECT_EQ(h.backend.state(), State::kRunning);

  h.report(1, TaskState::kFinished);
  h.timers.advance(Millis(1000));
  EXPECT_TRUE(h.exiter.codes.empty()) << "the last pass started before the task finished";
  answerPeers(h);
  ASSERT_EQ(h.decommissioner.passes.size(), 1u);
  h.decommissioner.finishPass(completePass());
  h.timers.advance(Millis(1000));
  h.timers.advance(Millis(0));
  EXPECT_EQ(h.exiter.codes, exitCodes({ExitCode::kSuccess}));
  auto removes = h.removeExecutors();
  ASSERT_EQ(removes.size(), 1u);
  EXPECT_EQ(removes[0].reason, "decommission finished");
}

TEST(BackendDecommissionTest, TaskFinishingDuringAPassForcesAnotherPass) {
  Harness h(decommissionOptions());
  h.runToRunning();
  h.launch(1);
  h.deliverMessage(proto::DecommissionExecutor{});
  answerPeers(h);
  // The task finishes (leaving a block) while pass 1 runs; pass 1 then reports complete.
  TaskStatusEvent done;
  done.task_id = 1;
  done.state = TaskState::kFinished;
  done.blocks = {blockAt("shuffle_0_1_0", kExecutorId)};
  h.backend.onTaskStatus(done);
  h.decommissioner.finishPass(completePass({blockAt("shuffle_0_0_0", "exec-2")}));
  EXPECT_EQ(h.decommissioner.released, std::vector<std::string>{"shuffle_0_0_0"});

  h.timers.advance(Millis(1000));
  EXPECT_TRUE(h.exiter.codes.empty()) << "pass 1 started before the task finished";
  answerPeers(h);
  ASSERT_EQ(h.decommissioner.passes.size(), 1u) << "a second pass starts";
  h.decommissioner.finishPass(completePass({blockAt("shuffle_0_1_0", "exec-2")}));
  h.timers.advance(Millis(1000));
  h.timers.advance(Millis(0));
  EXPECT_EQ(h.exiter.codes, exitCodes({ExitCode::kSuccess}));
  EXPECT_EQ(h.decommissioner.released,
            (std::vector<std::string>{"shuffle_0_0_0", "shuffle_0_1_0"}));
}

TEST(BackendDecommissionTest, MovedBlocksAreReportedBeforeTheirLocalCopiesGo) {
  Harness h(decommissionOptions());
  h.runToRunning();
  h.deliverMessage(proto::DecommissionExecutor{});
  answerPeers(h);
  h.decommissioner.finishPass(
      completePass({blockAt("rdd_2_0", "exec-2"), blockAt("task_9_out", "")}));
  auto infos = h.link.sentOfType("UpdateBlockInfo");
  ASSERT_EQ(infos.size(), 1u);
  auto info = proto::decodeBody<proto::UpdateBlockInfo>(infos[0].body);
  EXPECT_EQ(info.executor_id, kExecutorId);
  ASSERT_EQ(info.added.size(), 2u);
  EXPECT_EQ(info.added[0].executor_id, "exec-2");
  EXPECT_EQ(info.added[1].executor_id, "");
  EXPECT_EQ(info.removed, (std::vector<std::string>{"rdd_2_0", "task_9_out"}));
  EXPECT_EQ(h.decommissioner.released.size(), 2u);
}

TEST(BackendDecommissionTest, IncompletePassIsRetriedUntilComplete) {
  Harness h(decommissionOptions());
  h.runToRunning();
  h.deliverMessage(proto::DecommissionExecutor{});
  answerPeers(h);
  MigrationPassResult partial;
  partial.failed = {{"rdd_1_1", "peer: HTTP 507"}};
  partial.blocks_left = 1;
  partial.bytes_left = 10;
  h.decommissioner.finishPass(partial);
  h.timers.advance(Millis(1000));
  EXPECT_TRUE(h.exiter.codes.empty());
  EXPECT_EQ(h.backend.decommissionProgress()["blocks_failed"], 1);
  answerPeers(h);
  h.decommissioner.finishPass(completePass({blockAt("rdd_1_1", "")}));
  h.timers.advance(Millis(1000));
  h.timers.advance(Millis(0));
  EXPECT_EQ(h.exiter.codes, exitCodes({ExitCode::kSuccess}));
}

TEST(BackendDecommissionTest, WithoutMigrationExitsOnceNoTaskRuns) {
  Harness h(decommissionOptions());
  h.decommissioner.migration_enabled = false;
  h.runToRunning();
  h.launch(1);
  h.deliverMessage(proto::DecommissionExecutor{});
  EXPECT_EQ(h.link.attemptedOfType("GetPeers"), 0u);
  h.timers.advance(Millis(3000));
  EXPECT_TRUE(h.exiter.codes.empty());
  h.report(1, TaskState::kFinished);
  h.timers.advance(Millis(1000));
  h.timers.advance(Millis(0));
  EXPECT_EQ(h.exiter.codes, exitCodes({ExitCode::kSuccess}));
  EXPECT_TRUE(h.decommissioner.passes.empty());
}

TEST(BackendDecommissionTest, DisabledOnlyWarns) {
  BackendOptions options = decommissionOptions();
  options.decommission.enabled = false;
  Harness h(options);
  LogCapture log;
  h.runToRunning();
  h.backend.onDecommissionSignal();
  h.deliverMessage(proto::DecommissionExecutor{});
  EXPECT_FALSE(h.backend.decommissioning());
  EXPECT_EQ(h.link.attemptedOfType("ExecutorDecommissioning"), 0u);
  EXPECT_EQ(h.decommissioner.begins, 0);
  EXPECT_THAT(log.text(), HasSubstr("decommission is disabled"));
  h.launch(2);
  EXPECT_EQ(h.executor.launchCount(2), 1u);
  h.timers.advance(Millis(30000));
  EXPECT_TRUE(h.exiter.codes.empty());
}

TEST(BackendDecommissionTest, SecondTriggerOnlyWarns) {
  Harness h(decommissionOptions());
  LogCapture log;
  h.runToRunning();
  h.backend.onDecommissionSignal();
  h.backend.onDecommissionSignal();  // while the first ask is pending
  EXPECT_EQ(h.link.attemptedOfType("ExecutorDecommissioning"), 1u);
  h.link.takeAsk("ExecutorDecommissioning").done(okResult(Json{{"accepted", true}}));
  h.backend.onDecommissionSignal();
  h.deliverMessage(proto::DecommissionExecutor{});
  EXPECT_EQ(h.link.attemptedOfType("ExecutorDecommissioning"), 1u);
  EXPECT_EQ(h.decommissioner.begins, 1);
  EXPECT_EQ(h.link.attemptedOfType("GetPeers"), 1u);
  EXPECT_THAT(log.text(), HasSubstr("already started decommissioning"));
}

TEST(BackendDecommissionTest, DeadlineExitsIncompleteNamingEveryBlockLeft) {
  BackendOptions options = decommissionOptions();
  options.decommission.deadline = Millis(5000);
  Harness h(options);
  LogCapture log;
  h.runToRunning();
  h.deliverMessage(proto::DecommissionExecutor{});
  answerPeers(h);
  h.decommissioner.left = {"rdd_7_1", "shuffle_3_0_2"};
  MigrationPassResult failed;
  failed.failed = {{"rdd_7_1", "no peers"}, {"shuffle_3_0_2", "no peers"}};
  failed.blocks_left = 2;
  h.decommissioner.finishPass(failed);
  h.timers.advance(Millis(4999));
  EXPECT_TRUE(h.exiter.codes.empty());
  h.timers.advance(Millis(1));
  h.timers.advance(Millis(0));
  EXPECT_EQ(h.exiter.codes, exitCodes({ExitCode::kDecommissionIncomplete}));
  EXPECT_THAT(log.text(), HasSubstr("rdd_7_1"));
  EXPECT_THAT(log.text(), HasSubstr("shuffle_3_0_2"));
  auto removes = h.removeExecutors();
  ASSERT_EQ(removes.size(), 1u);
  EXPECT_THAT(removes[0].reason, HasSubstr("deadline"));
}

TEST(BackendDecommissionTest, HeartbeatCarriesDecommissionProgress) {
  Harness h(decommissionOptions());
  h.runToRunning();
  h.timers.advance(h.backend.heartbeatInterval());
  auto beats = h.link.sentOfType("Heartbeat");
  ASSERT_FALSE(beats.empty());
  EXPECT_TRUE(proto::decodeBody<proto::Heartbeat>(beats.back().body).decommission.is_null());
  h.launch(1);
  h.deliverMessage(proto::DecommissionExecutor{});
  answerPeers(h);
  h.decommissioner.finishPass(completePass({blockAt("rdd_1_0", "exec-2", 4096)}));
  h.timers.advance(h.backend.heartbeatInterval());
  beats = h.link.sentOfType("Heartbeat");
  auto progress = proto::decodeBody<proto::Heartbeat>(beats.back().body).decommission;
  ASSERT_TRUE(progress.is_object());
  EXPECT_EQ(progress["state"], "waiting-for-tasks");
  EXPECT_EQ(progress["blocks_migrated"], 1);
  EXPECT_EQ(progress["bytes_migrated"], 4096);
}

TEST(BackendDecommissionTest, ProgressOfARunningPassShowsBlockByBlock) {
  Harness h(decommissionOptions());
  h.runToRunning();
  h.deliverMessage(proto::DecommissionExecutor{});
  answerPeers(h);
  ASSERT_EQ(h.decommissioner.passes.size(), 1u);
  auto progress = [&] {
    h.timers.advance(h.backend.heartbeatInterval());
    auto beats = h.link.sentOfType("Heartbeat");
    return proto::decodeBody<proto::Heartbeat>(beats.back().body).decommission;
  };
  h.decommissioner.passes.front().progress(MigrationPassProgress{4, 4000, 0, 0});
  auto at_start = progress();
  EXPECT_EQ(at_start["state"], "migrating");
  EXPECT_EQ(at_start["blocks_total"], 4);
  EXPECT_EQ(at_start["blocks_left"], 4);
  EXPECT_EQ(at_start["blocks_migrated"], 0);
  h.decommissioner.passes.front().progress(MigrationPassProgress{4, 4000, 3, 2500});
  auto later = progress();
  EXPECT_EQ(later["blocks_migrated"], 3);
  EXPECT_EQ(later["bytes_migrated"], 2500);
  EXPECT_EQ(later["blocks_left"], 1);
  EXPECT_EQ(later["bytes_left"], 1500);
  EXPECT_EQ(h.backend.statusJson()["decommission"]["blocks_migrated"], 3);

  // The pass's result replaces its running count; a late report changes nothing.
  auto report = h.decommissioner.passes.front().progress;
  MigrationPassResult result;
  result.moved = {blockAt("rdd_1_0", "exec-2", 1000), blockAt("rdd_1_1", "exec-2", 1000),
                  blockAt("rdd_1_2", "exec-2", 500)};
  result.bytes_moved = 2500;
  result.failed = {{"rdd_1_3", "HTTP 507"}};
  result.blocks_left = 1;
  result.bytes_left = 1500;
  h.decommissioner.finishPass(result);
  report(MigrationPassProgress{4, 4000, 4, 4000});
  auto after = progress();
  EXPECT_EQ(after["blocks_migrated"], 3);
  EXPECT_EQ(after["blocks_failed"], 1);
  EXPECT_EQ(after["blocks_left"], 1);
  EXPECT_EQ(after["bytes_left"], 1500);
}

TEST(BackendTest, FinishedTaskBlocksAreAnnouncedBeforeItsStatus) {
  Harness h;
  h.runToRunning();
  h.launch(4);
  TaskStatusEvent done;
  done.task_id = 4;
  done.state = TaskState::kFinished;
  done.blocks = {blockAt("task_4_result", kExecutorId)};
  h.backend.onTaskStatus(done);
  ASSERT_GE(h.link.sent.size(), 2u);
  const auto& info = h.link.sent[h.link.sent.size() - 2];
  EXPECT_EQ(info.type, "UpdateBlockInfo");
  EXPECT_EQ(proto::decodeBody<proto::UpdateBlockInfo>(info.body).added.at(0).id, "task_4_result");
  EXPECT_EQ(h.lastSent().type, "StatusUpdate");
}

}  // namespace
}  // namespace dockhand::agent
