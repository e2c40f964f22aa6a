// Resuming an agent (protocol.md 6.6) over real sockets: a raw WebSocket agent
// (driver_protocol_fixture.h) registers with `resumes`, its connection drops, and a new
// connection says Hello and ResumeExecutor. Against a DriverService in this process (to run a
// job and look at its tasks) and against the real `dockhand-driver serve` (its log lines and
// its control API). Every wait is bounded.
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "dockhand/driver/driver_service.h"
#include "driver_protocol_fixture.h"

namespace dockhand::driver {
namespace {

using driver_protocol_fixture::Client;
using driver_protocol_fixture::DriverProtocolTest;
using driver_protocol_fixture::errorCode;
using std::chrono::milliseconds;

Json registerResuming(Client& c, const std::string& id, int cores) {
  return c.ask(
      "RegisterExecutor",
      {{"executor_id", id}, {"hostname", "127.0.0.1"}, {"cores", cores}, {"resumes", true}});
}

Json resume(Client& c, const std::string& id, const std::vector<std::uint64_t>& running,
            Json blocks = Json::array()) {
  return c.ask("ResumeExecutor",
               {{"executor_id", id}, {"running", running}, {"blocks", std::move(blocks)}});
}

// Polls `done` every 20 ms for up to 5 s.
bool eventually(const std::function<bool()>& done) {
  const auto deadline = SteadyClock::now() + std::chrono::seconds(5);
  while (SteadyClock::now() < deadline) {
    if (done()) return true;
    std::this_thread::sleep_for(milliseconds(20));
  }
  return done();
}

JobSpec tasks(int count) {
  JobSpec job;
  job.name = "resume";
  for (int i = 0; i < count; ++i) {
    TaskSpec t;
    t.name = "t" + std::to_string(i);
    t.partition = i;
    t.payload = {{"command", {"/bin/true"}}};
    job.tasks.push_back(std::move(t));
  }
  return job;
}

class DriverResumeTest : public ::testing::Test {
 protected:
  void startService(long grace_ms) {
    DriverConfig config;
    config.heartbeat_interval_ms = 60000;
    config.agent_reconnect_grace_ms = grace_ms;
    service_ = std::make_unique<DriverService>(std::move(config));
    service_->start("127.0.0.1", 0);
  }
  // A connection that said Hello, registered `id` with `resumes` and LaunchedExecutor.
  std::unique_ptr<Client> connectAgent(const std::string& id, int cores) {
    auto c = std::make_unique<Client>(service_->port());
    EXPECT_EQ(c->hello()["ok"], true);
    EXPECT_EQ(registerResuming(*c, id, cores)["ok"], true);
    c->send({{"type", "LaunchedExecutor"}, {"body", {{"executor_id", id}}}});
    return c;
  }
  // The ids of the next `count` LaunchTask frames on `c`.
  static std::vector<std::uint64_t> launchesOn(Client& c, std::size_t count) {
    std::vector<std::uint64_t> ids;
    while (ids.size() < count) {
      auto frame = c.receive();
      if (!frame || (*frame)["type"] != "LaunchTask") {
        ADD_FAILURE() << "expected LaunchTask, got " << (frame ? frame->dump() : "nothing");
        break;
      }
      ids.push_back((*frame)["body"]["task"]["task_id"].get<std::uint64_t>());
    }
    return ids;
  }
  static void finish(Client& c, const std::string& id, std::uint64_t task_id) {
    c.send({{"type", "StatusUpdate"},
            {"body",
             {{"executor_id", id},
              {"task_id", task_id},
              {"state", "FINISHED"},
              {"result", {{"exit_code", 0}}}}}});
  }
  Json executorEntry(const std::string& id) const {
    const Json listing = service_->executorsJson();
    for (const auto& e : listing["executors"]) {
      if (e.value("executor_id", "") == id) return e;
    }
    return nullptr;
  }
  std::string stateOf(const std::string& id) const {
    Json e = executorEntry(id);
    return e.is_null() ? "gone" : e.value("state", "");
  }
  std::vector<TaskRecord> records() const {
    std::vector<TaskRecord> out;
    service_->inspect([&](const Scheduler& s) { out = s.tasks(); });
    return out;
  }
  void TearDown() override {
    if (service_) service_->stop();
  }
  std::unique_ptr<DriverService> service_;
};

TEST_F(DriverResumeTest, AnAgentBackWithinTheWindowKeepsItsTasks) {
  startService(10000);
  auto agent = connectAgent("a", 2);
  service_->submit(tasks(3));
  const std::vector<std::uint64_t> ids = launchesOn(*agent, 2);
  ASSERT_EQ(ids.size(), 2u);

  agent.reset();  // the connection drops
  ASSERT_TRUE(eventually([&] { return stateOf("a") == "disconnected"; })) << stateOf("a");
  Json held = executorEntry("a");
  EXPECT_EQ(held["connected"], false);
  EXPECT_TRUE(held["disconnected_for_ms"].is_number()) << held;
  EXPECT_EQ(held["running_tasks"], 2);
  EXPECT_EQ(service_->counters().agents_lost, 0u);
  for (const auto& r : records()) EXPECT_LE(r.launches, 1) << r.spec.name << " relaunched";
  Json cluster = service_->clusterJson();
  ASSERT_EQ(cluster["executors"].size(), 1u);
  EXPECT_EQ(cluster["executors"][0]["state"], "disconnected");
  EXPECT_NE(
      cluster["executors"][0]["disconnect_reason"].get<std::string>().find("connection closed"),
      std::string::npos)
      << cluster["executors"][0];
  EXPECT_NE(service_->metricsText().find("dockhand_driver_agents{state=\"disconnected\"} 1"),
            std::string::npos);

  Client back(service_->port());
  ASSERT_EQ(back.hello()["ok"], true);
  Json reply = resume(back, "a", ids);
  ASSERT_EQ(reply["ok"], true) << reply;
  EXPECT_EQ(reply["body"]["tasks"], Json(ids));
  EXPECT_EQ(stateOf("a"), "active");
  EXPECT_EQ(executorEntry("a")["disconnected_for_ms"], nullptr);

  // The new connection is the agent's: its updates count, and the third task comes to it.
  finish(back, "a", ids[0]);
  const std::vector<std::uint64_t> third = launchesOn(back, 1);
  ASSERT_EQ(third.size(), 1u);
  finish(back, "a", ids[1]);
  finish(back, "a", third[0]);
  ASSERT_EQ(service_->waitForJob(SteadyClock::now() + std::chrono::seconds(10)),
            JobState::kSucceeded);
  for (const auto& r : records()) EXPECT_EQ(r.launches, 1) << r.spec.name;
  const ServiceCounters counters = service_->counters();
  EXPECT_EQ(counters.agents_lost, 0u);
  EXPECT_EQ(counters.registrations, 1u) << "a resume is no registration";
  EXPECT_EQ(counters.stray_updates, 0u);
}

TEST_F(DriverResumeTest, PastTheWindowTheAgentIsLostAndItsResumeRefused) {
  startService(300);
  auto agent = connectAgent("a", 1);
  service_->submit(tasks(1));
  const std::vector<std::uint64_t> ids = launchesOn(*agent, 1);
  ASSERT_EQ(ids.size(), 1u);
  agent.reset();
  ASSERT_TRUE(eventually([&] { return stateOf("a") == "gone"; })) << stateOf("a");
  EXPECT_EQ(service_->counters().agents_lost, 1u);
  EXPECT_EQ(records().at(0).outcome, TaskOutcome::kPending) << "waits for another agent";
  EXPECT_EQ(records().at(0).failures, 0);

  Client late(service_->port());
  ASSERT_EQ(late.hello()["ok"], true);
  Json refused = resume(late, "a", ids);
  EXPECT_EQ(refused["ok"], false);
  EXPECT_EQ(errorCode(refused), "not_resumable");
  EXPECT_NE(refused["error"]["message"].get<std::string>().find("'a'"), std::string::npos);
  EXPECT_TRUE(late.closedByPeer());

  // It may register anew, as a new agent, and runs the task again.
  auto fresh = connectAgent("a", 1);
  const std::vector<std::uint64_t> again = launchesOn(*fresh, 1);
  ASSERT_EQ(again.size(), 1u);
  EXPECT_NE(again[0], ids[0]);
}

TEST_F(DriverResumeTest, AHeldAgentThatRegistersAnewIsANewAgent) {
  startService(10000);
  auto agent = connectAgent("a", 1);
  service_->submit(tasks(1));
  const std::vector<std::uint64_t> ids = launchesOn(*agent, 1);
  ASSERT_EQ(ids.size(), 1u);
  agent.reset();
  ASSERT_TRUE(eventually([&] { return stateOf("a") == "disconnected"; }));

  // Restarted, it registers instead of resuming: the held one and its task are gone.
  auto fresh = connectAgent("a", 1);
  const std::vector<std::uint64_t> again = launchesOn(*fresh, 1);
  ASSERT_EQ(again.size(), 1u);
  EXPECT_NE(again[0], ids[0]);
  EXPECT_EQ(service_->counters().agents_lost, 1u);
  EXPECT_EQ(records().at(0).failures, 0);
  EXPECT_EQ(stateOf("a"), "active");
}

TEST_F(DriverResumeTest, AnAgentWithoutResumesIsLostAtOnce) {
  startService(10000);
  auto agent = std::make_unique<Client>(service_->port());
  ASSERT_EQ(agent->hello()["ok"], true);
  ASSERT_EQ(agent->registerAs("plain", 1)["ok"], true);
  agent->send({{"type", "LaunchedExecutor"}, {"body", {{"executor_id", "plain"}}}});
  service_->submit(tasks(1));
  ASSERT_EQ(launchesOn(*agent, 1).size(), 1u);
  agent.reset();
  ASSERT_TRUE(eventually([&] { return stateOf("plain") == "gone"; })) << stateOf("plain");
  EXPECT_EQ(service_->counters().agents_lost, 1u);
  EXPECT_EQ(records().at(0).outcome, TaskOutcome::kPending);
}

TEST_F(DriverResumeTest, WithNoWindowAResumingAgentIsLostAtOnce) {
  startService(0);
  auto agent = connectAgent("a", 1);
  service_->submit(tasks(1));
  ASSERT_EQ(launchesOn(*agent, 1).size(), 1u);
  agent.reset();
  ASSERT_TRUE(eventually([&] { return stateOf("a") == "gone"; })) << stateOf("a");
  EXPECT_EQ(service_->counters().agents_lost, 1u);
}

TEST_F(DriverProtocolTest, AResumeTakesOverAConnectionTheDriverStillHasAndUnknownIsRefused) {
  Json config = driver_protocol_fixture::baseConfig();
  config["agent_reconnect_grace_ms"] = 10000;
  ASSERT_NO_FATAL_FAILURE(start(config));
  auto agent = std::make_unique<Client>(port_);
  ASSERT_EQ(agent->hello()["ok"], true);
  ASSERT_EQ(registerResuming(*agent, "exec-1", 2)["ok"], true);
  agent->send({{"type", "LaunchedExecutor"}, {"body", {{"executor_id", "exec-1"}}}});

  // The agent gave its connection up (after a partition) before this side saw it end: the
  // resume on a new connection wins, and the old one is closed.
  auto other = std::make_unique<Client>(port_);
  ASSERT_EQ(other->hello()["ok"], true);
  Json taken = resume(*other, "exec-1", {});
  EXPECT_EQ(taken["ok"], true) << taken;
  EXPECT_TRUE(agent->closedByPeer());
  EXPECT_EQ(driver_protocol_fixture::executor(port_, "exec-1")["state"], "active");

  Client stranger(port_);
  ASSERT_EQ(stranger.hello()["ok"], true);
  EXPECT_EQ(errorCode(resume(stranger, "nobody", {})), "not_resumable");

  // ResumeExecutor needs Hello first, as any frame.
  Client rude(port_);
  EXPECT_EQ(errorCode(resume(rude, "exec-1", {})), "unexpected_message");

  // Dropped, then back with a block it holds.
  other.reset();
  ASSERT_TRUE(eventually([&] {
    const Json e = driver_protocol_fixture::executor(port_, "exec-1");
    return e.is_object() && e["state"] == "disconnected";
  }));
  Client back(port_);
  ASSERT_EQ(back.hello()["ok"], true);
  Json blocks = Json::array({{{"id", "shuffle_0_0_0"},
                              {"size", 10},
                              {"executor_id", "exec-1"},
                              {"url", "http://127.0.0.1:1001/blocks/shuffle_0_0_0"}}});
  Json reply = resume(back, "exec-1", {}, blocks);
  ASSERT_EQ(reply["ok"], true) << reply;
  EXPECT_EQ(reply["body"]["tasks"], Json::array());
  // Registered again on this connection: a second resume or registration is refused.
  EXPECT_EQ(errorCode(resume(back, "exec-1", {})), "unexpected_message");
  Json listed = driver_protocol_fixture::executor(port_, "exec-1");
  EXPECT_EQ(listed["state"], "active");
  EXPECT_EQ(listed["blocks"], 1);

  const std::string log = driver_->log();
  EXPECT_NE(log.find("agent 'exec-1' disconnected (connection closed"), std::string::npos) << log;
  EXPECT_NE(log.find("holding its 0 task(s) and 0 block(s) for 10000 ms"), std::string::npos)
      << log;
  EXPECT_NE(log.find("agent 'exec-1' resumed from"), std::string::npos) << log;
  EXPECT_NE(log.find(": 0 task(s), 1 block(s)"), std::string::npos) << log;
  EXPECT_EQ(log.find("agent 'exec-1' lost"), std::string::npos) << log;
}

TEST_F(DriverProtocolTest, AHeldAgentNotBackInTimeIsLoggedLost) {
  Json config = driver_protocol_fixture::baseConfig();
  config["agent_reconnect_grace_ms"] = 300;
  ASSERT_NO_FATAL_FAILURE(start(config));
  {
    Client agent(port_);
    ASSERT_EQ(agent.hello()["ok"], true);
    ASSERT_EQ(registerResuming(agent, "exec-1", 2)["ok"], true);
  }
  ASSERT_TRUE(eventually([&] {
    return driver_->log().find(
               "agent 'exec-1' lost: not back within 300 ms; its tasks are "
               "rescheduled") != std::string::npos;
  })) << driver_->log();
  EXPECT_TRUE(driver_protocol_fixture::executor(port_, "exec-1").is_null());
}

TEST_F(DriverProtocolTest, ASilentResumingAgentIsClosedAndHeld) {
  Json config = driver_protocol_fixture::baseConfig();
  config["agent_timeout_ms"] = 800;
  config["heartbeat_interval_ms"] = 300;
  config["agent_reconnect_grace_ms"] = 10000;
  ASSERT_NO_FATAL_FAILURE(start(config));
  Client quiet(port_);
  ASSERT_EQ(quiet.hello()["ok"], true);
  ASSERT_EQ(registerResuming(quiet, "quiet-1", 1)["ok"], true);
  EXPECT_TRUE(quiet.closedByPeer());
  const Json held = driver_protocol_fixture::executor(port_, "quiet-1");
  ASSERT_TRUE(held.is_object()) << driver_->log();
  EXPECT_EQ(held["state"], "disconnected");
  const std::string log = driver_->log();
  EXPECT_NE(log.find("agent 'quiet-1' disconnected (no message for more than 800 ms); holding"),
            std::string::npos)
      << log;
  EXPECT_EQ(log.find("agent 'quiet-1' lost"), std::string::npos) << log;

  Client back(port_);
  ASSERT_EQ(back.hello()["ok"], true);
  EXPECT_EQ(resume(back, "quiet-1", {})["ok"], true);
}

}  // namespace
}  // namespace dockhand::driver
