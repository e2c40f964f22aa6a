// Protocol-level tests against the real `dockhand-driver serve` process on loopback, with a
// raw WebSocket client: every wait is bounded, the process and its temp dir are ours.
#include <sys/wait.h>

#include <chrono>
#include <thread>

#include <gtest/gtest.h>

#include "driver_protocol_fixture.h"

namespace {

using namespace driver_protocol_fixture;  // NOLINT(google-build-using-namespace)

TEST_F(DriverProtocolTest, AnswersHelloWithItsVersion) {
  ASSERT_NO_FATAL_FAILURE(start());
  Client c(port_);
  Json reply = c.hello();
  EXPECT_EQ(reply["type"], "Reply");
  EXPECT_EQ(reply["re"], 1);
  EXPECT_EQ(reply["ok"], true);
  EXPECT_EQ(reply["body"]["protocol_version"], 1);
  EXPECT_EQ(reply["body"]["role"], "driver");
  EXPECT_EQ(reply["body"]["software"].get<std::string>().rfind("dockhand-driver ", 0), 0u);
}

TEST_F(DriverProtocolTest, RefusesAnotherProtocolVersionAndCloses) {
  ASSERT_NO_FATAL_FAILURE(start());
  Client c(port_);
  Json reply = c.hello(99);
  EXPECT_EQ(reply["ok"], false);
  EXPECT_EQ(errorCode(reply), "protocol_version");
  EXPECT_TRUE(c.closedByPeer());
}

TEST_F(DriverProtocolTest, FirstFrameMustBeHello) {
  ASSERT_NO_FATAL_FAILURE(start());
  Client c(port_);
  Json reply = c.registerAs("early");
  EXPECT_EQ(reply["ok"], false);
  EXPECT_EQ(errorCode(reply), "unexpected_message");
}

TEST_F(DriverProtocolTest, RegistersServesAppConfigAndRefusesADuplicateId) {
  ASSERT_NO_FATAL_FAILURE(start());
  Client first(port_);
  ASSERT_EQ(first.hello()["ok"], true);
  Json config = first.ask("RetrieveAppConfig", {{"resource_profile_id", 0}});
  ASSERT_EQ(config["ok"], true) << config;
  EXPECT_EQ(config["body"]["properties"]["dockhand.heartbeat.interval_ms"], "200");
  EXPECT_EQ(config["body"]["properties"]["dockhand.driver.timeout_ms"], "30000");
  ASSERT_EQ(first.registerAs("exec-1")["ok"], true);
  first.send({{"type", "LaunchedExecutor"}, {"body", {{"executor_id", "exec-1"}}}});

  // The driver heartbeats registered agents.
  auto beat = first.receive(/*skip_heartbeats=*/false);
  ASSERT_TRUE(beat.has_value());
  EXPECT_EQ((*beat)["type"], "Heartbeat");
  EXPECT_EQ((*beat)["body"]["executor_id"], "");

  Client second(port_);
  ASSERT_EQ(second.hello()["ok"], true);
  Json refused = second.registerAs("exec-1");
  EXPECT_EQ(refused["ok"], false);
  EXPECT_EQ(errorCode(refused), "duplicate_executor");
  EXPECT_NE(refused["error"]["message"].get<std::string>().find("exec-1"), std::string::npos);
  EXPECT_EQ(second.registerAs("exec-2")["ok"], true);
}

TEST_F(DriverProtocolTest, MalformedFramesGetErrorsAndOtherClientsAreStillServed) {
  ASSERT_NO_FATAL_FAILURE(start());
  Client bad(port_);
  Client good(port_);
  ASSERT_EQ(bad.hello()["ok"], true);
  ASSERT_EQ(good.hello()["ok"], true);
  ASSERT_EQ(good.registerAs("good-1")["ok"], true);

  bad.sendText("this is not JSON {");
  auto e1 = bad.receive();
  ASSERT_TRUE(e1.has_value());
  EXPECT_EQ((*e1)["type"], "Error");
  EXPECT_EQ(errorCode(*e1), "malformed_frame");

  bad.sendText("[1, 2, 3]");
  auto e2 = bad.receive();
  ASSERT_TRUE(e2.has_value());
  EXPECT_EQ(errorCode(*e2), "malformed_frame");

  bad.send({{"type", "NoSuchMessage"}, {"id", 40}});
  auto e3 = bad.receive();
  ASSERT_TRUE(e3.has_value());
  EXPECT_EQ((*e3)["type"], "Reply");
  EXPECT_EQ((*e3)["re"], 40);
  EXPECT_EQ(errorCode(*e3), "unknown_type");

  bad.send({{"type", "RegisterExecutor"},
            {"id", 41},
            {"body", {{"executor_id", "x"}, {"cores", "many"}}}});
  auto e4 = bad.receive();
  ASSERT_TRUE(e4.has_value());
  EXPECT_EQ((*e4)["re"], 41);
  EXPECT_EQ(errorCode(*e4), "invalid_body");

  bad.send({{"type", "StatusUpdate"}, {"body", {{"executor_id", "x"}}}});
  auto e5 = bad.receive();
  ASSERT_TRUE(e5.has_value());
  EXPECT_EQ((*e5)["type"], "Error");
  EXPECT_EQ(errorCode(*e5), "not_registered");

  // Both connections are still served.
  EXPECT_EQ(bad.ask("RetrieveAppConfig", Json::object())["ok"], true);
  EXPECT_EQ(good.ask("RetrieveAppConfig", Json::object())["ok"], true);
  EXPECT_EQ(bad.registerAs("bad-1")["ok"], true);
}

TEST_F(DriverProtocolTest, RefusesAnOversizedFrameAndCloses) {
  ASSERT_NO_FATAL_FAILURE(start());
  Client big(port_);
  Client bystander(port_);
  ASSERT_EQ(big.hello()["ok"], true);
  ASSERT_EQ(bystander.hello()["ok"], true);
  big.sendText(std::string(std::size_t{64} * 1024, 'x'));
  auto error = big.receive();
  ASSERT_TRUE(error.has_value());
  EXPECT_EQ((*error)["type"], "Error");
  EXPECT_EQ(errorCode(*error), "frame_too_large");
  const HttpResult scraped = http(port_, "GET", "/metrics");
  EXPECT_NE(
      scraped.text.find("dockhand_driver_connections_dropped_total{reason=\"frame_too_large\"} 1"),
      std::string::npos)
      << "the drop is counted:\n"
      << scraped.text;
  EXPECT_TRUE(big.closedByPeer());
  EXPECT_EQ(bystander.registerAs("still-here")["ok"], true);
  Client after(port_);
  EXPECT_EQ(after.hello()["ok"], true);
}

// What an agent's heartbeat says it holds reaches GET /v1/executors and /metrics (one series
// per agent), and an agent that left has no series left.
TEST_F(DriverProtocolTest, HeartbeatFiguresReachTheExecutorsListAndMetricsUntilTheAgentLeaves) {
  ASSERT_NO_FATAL_FAILURE(start());
  Client agent(port_);
  ASSERT_EQ(agent.hello()["ok"], true);
  ASSERT_EQ(agent.registerAs("exec-1")["ok"], true);
  agent.send(
      {{"type", "Heartbeat"},
       {"body",
        {{"executor_id", "exec-1"},
         {"running_tasks", 0},
         {"metrics",
          {{"rss_bytes", 12582912}, {"threads", 14}, {"blocks", 3}, {"block_bytes", 4096}}}}}});
  const auto by = Clock::now() + std::chrono::seconds(5);
  while (Clock::now() < by && !executor(port_, "exec-1")["metrics"].contains("threads")) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(executor(port_, "exec-1")["metrics"]["threads"], 14);
  std::string text = http(port_, "GET", "/metrics").text;
  EXPECT_NE(text.find("dockhand_driver_agent_threads{agent=\"exec-1\"} 14\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("dockhand_driver_agent_block_bytes{agent=\"exec-1\"} 4096\n"),
            std::string::npos);
  EXPECT_NE(
      text.find("dockhand_driver_agent_memory_bytes{agent=\"exec-1\",of=\"agent\"} 12582912\n"),
      std::string::npos);

  agent.send(
      {{"type", "RemoveExecutor"}, {"body", {{"executor_id", "exec-1"}, {"reason", "done"}}}});
  const auto gone_by = Clock::now() + std::chrono::seconds(5);
  while (Clock::now() < gone_by && !executor(port_, "exec-1").is_null()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  text = http(port_, "GET", "/metrics").text;
  EXPECT_EQ(text.find("agent=\"exec-1\""), std::string::npos) << text;
}

TEST_F(DriverProtocolTest, SilentAgentIsDroppedAndItsIdFreed) {
  Json config = baseConfig();
  config["agent_timeout_ms"] = 800;
  config["heartbeat_interval_ms"] = 300;
  ASSERT_NO_FATAL_FAILURE(start(config));
  Client quiet(port_);
  ASSERT_EQ(quiet.hello()["ok"], true);
  ASSERT_EQ(quiet.registerAs("quiet-1")["ok"], true);
  EXPECT_TRUE(quiet.closedByPeer());

  Client again(port_);
  ASSERT_EQ(again.hello()["ok"], true);
  EXPECT_EQ(again.registerAs("quiet-1")["ok"], true);
}

TEST_F(DriverProtocolTest, PeersAreOtherAgentsWithABlockServerThatAreNotLeaving) {
  ASSERT_NO_FATAL_FAILURE(start());
  Client a(port_);
  Client b(port_);
  Client c(port_);
  Client plain(port_);
  for (Client* client : {&a, &b, &c, &plain}) ASSERT_EQ(client->hello()["ok"], true);
  ASSERT_EQ(a.registerAs("a", 2, "http://127.0.0.1:1001/")["ok"], true);
  ASSERT_EQ(b.registerAs("b", 2, "http://127.0.0.1:1002/")["ok"], true);
  ASSERT_EQ(c.registerAs("c", 2, "http://127.0.0.1:1003/")["ok"], true);
  ASSERT_EQ(plain.registerAs("plain", 2)["ok"], true);

  Json peers = a.ask("GetPeers", {{"executor_id", "a"}});
  ASSERT_EQ(peers["ok"], true) << peers;
  EXPECT_EQ(peerIds(peers), (std::vector<std::string>{"b", "c"}));
  // The trailing "/" the agent sent is dropped (docs/protocol.md 8.4).
  EXPECT_EQ(peers["body"]["peers"][0]["block_url"], "http://127.0.0.1:1002");

  Json accepted = c.ask("ExecutorDecommissioning", {{"executor_id", "c"}});
  ASSERT_EQ(accepted["ok"], true) << accepted;
  EXPECT_EQ(accepted["body"]["accepted"], true);
  EXPECT_EQ(peerIds(a.ask("GetPeers", {{"executor_id", "a"}})), std::vector<std::string>{"b"});
  // The leaving agent itself still gets the others.
  EXPECT_EQ(peerIds(c.ask("GetPeers", {{"executor_id", "c"}})),
            (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(executor(port_, "c")["state"], "decommissioning");
}

TEST_F(DriverProtocolTest, ControlApiListsExecutorsAndDecommissionsOne) {
  ASSERT_NO_FATAL_FAILURE(start());
  Client agent(port_);
  ASSERT_EQ(agent.hello()["ok"], true);
  ASSERT_EQ(agent.registerAs("exec-1", 2, "http://127.0.0.1:1001/")["ok"], true);
  agent.send({{"type", "LaunchedExecutor"}, {"body", {{"executor_id", "exec-1"}}}});
  agent.send({{"type", "UpdateBlockInfo"},
              {"body",
               {{"executor_id", "exec-1"},
                {"added",
                 {{{"id", "shuffle_0_0_0"},
                   {"size", 10},
                   {"executor_id", "exec-1"},
                   {"url", "http://127.0.0.1:1001/blocks/shuffle_0_0_0"}},
                  {{"id", "shuffle_0_0_1"},
                   {"size", 12},
                   {"executor_id", ""},
                   {"url", "fallback:shuffle_0_0_1"}}}}}}});

  // UpdateBlockInfo is one-way: poll the listing until it shows.
  Json listed;
  const auto deadline = Clock::now() + std::chrono::seconds(5);
  while (Clock::now() < deadline) {
    listed = executor(port_, "exec-1");
    if (!listed.is_null() && listed["state"] == "active" && listed["blocks"] == 1) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_FALSE(listed.is_null());
  EXPECT_EQ(listed["state"], "active");
  EXPECT_EQ(listed["blocks"], 1);
  EXPECT_EQ(listed["cores"], 2);
  EXPECT_EQ(listed["block_url"], "http://127.0.0.1:1001");
  EXPECT_EQ(http(port_, "GET", "/v1/executors").body["fallback_blocks"], 1);

  HttpResult done =
      http(port_, "POST", "/v1/executors/exec-1/decommission", R"({"reason": "spot reclaim"})");
  EXPECT_EQ(done.status, 200) << done.body;
  auto order = agent.receive();
  ASSERT_TRUE(order.has_value());
  EXPECT_EQ((*order)["type"], "DecommissionExecutor");
  EXPECT_EQ((*order)["body"]["reason"], "spot reclaim");
  EXPECT_EQ(executor(port_, "exec-1")["state"], "decommissioning");

  HttpResult unknown = http(port_, "POST", "/v1/executors/nobody/decommission");
  EXPECT_EQ(unknown.status, 404);
  EXPECT_NE(unknown.body.value("error", "").find("nobody"), std::string::npos) << unknown.body;
  EXPECT_EQ(http(port_, "GET", "/v1/executors/exec-1/decommission").status, 405);
  EXPECT_EQ(http(port_, "GET", "/v1/nothing").status, 404);

  // Progress in heartbeats, then a clean leave.
  agent.send({{"type", "Heartbeat"},
              {"body",
               {{"executor_id", "exec-1"},
                {"running_tasks", 0},
                {"decommission",
                 {{"state", "migrating"}, {"blocks_total", 1}, {"blocks_migrated", 0}}}}}});
  agent.send({{"type", "RemoveExecutor"},
              {"body", {{"executor_id", "exec-1"}, {"reason", "decommission finished"}}}});
  const auto gone_by = Clock::now() + std::chrono::seconds(5);
  while (Clock::now() < gone_by && !executor(port_, "exec-1").is_null()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_TRUE(executor(port_, "exec-1").is_null());
  const std::string log = driver_->log();
  EXPECT_NE(log.find("agent 'exec-1' decommission migrating"), std::string::npos) << log;
  EXPECT_NE(log.find("agent 'exec-1' finished decommissioning and left"), std::string::npos) << log;
}

TEST_F(DriverProtocolTest, ExitsCleanlyOnSigtermWithAgentsConnected) {
  ASSERT_NO_FATAL_FAILURE(start());
  Client agent(port_);
  ASSERT_EQ(agent.hello()["ok"], true);
  ASSERT_EQ(agent.registerAs("exec-1")["ok"], true);
  driver_->terminate();
  // The agent is told to stop, then the connection closes.
  auto stop = agent.receive();
  ASSERT_TRUE(stop.has_value());
  EXPECT_EQ((*stop)["type"], "StopExecutor");
  EXPECT_TRUE(agent.closedByPeer());
  ASSERT_TRUE(driver_->waitExit(std::chrono::seconds(10)));
  EXPECT_TRUE(WIFEXITED(driver_->exitStatus()));
  EXPECT_EQ(WEXITSTATUS(driver_->exitStatus()), 0);
}

}  // namespace
