// Unit tests of the Backend's bootstrap: connecting (retries, authentication), fetching the
// app config, registering, and the heartbeats and driver-silence clock once it runs.
#include "backend_harness.h"

namespace dockhand::agent::backend_testing {
namespace {

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
  EXPECT_TRUE(reg.waits_for_cores) << "it holds what does not fit its cores";
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
      h.deliverMessage(proto::UpdateExecutorLogLevel{.level = "info"});
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

}  // namespace
}  // namespace dockhand::agent::backend_testing
