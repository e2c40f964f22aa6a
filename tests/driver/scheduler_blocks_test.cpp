// The Scheduler with blocks: inputs waiting for a location, fallback reads, lost blocks
// rerunning their producers, and decommissioning agents.
#include "dockhand/driver/scheduler.h"

#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "scheduler_fixture.h"

namespace dockhand::driver {
namespace {

using namespace scheduler_fixture;  // NOLINT(google-build-using-namespace)

TEST_F(BlockSchedulingTest, TaskWaitsUntilEveryInputHasALocation) {
  addBlockAgent("a", 4);
  Actions out;
  scheduler_.submit(twoStage(), now_, out);
  ASSERT_EQ(launches(out).size(), 2u);  // the maps; the reduce waits for b0 and b1
  EXPECT_EQ(launchOf(out, "reduce"), nullptr);
  EXPECT_EQ(scheduler_.progress().waiting_for_inputs, 1u);

  Actions done;
  scheduler_.onStatusUpdate("a", status(*launchOf(out, "map-0"), TaskState::kFinished), now_, done);
  scheduler_.onStatusUpdate("a", status(*launchOf(out, "map-1"), TaskState::kFinished), now_, done);
  report("a", {block("b0", "a")}, {}, done);
  EXPECT_EQ(launchOf(done, "reduce"), nullptr) << "b1 has no location yet";

  Actions ready;
  report("a", {block("b1", "a")}, {}, ready);
  const Action* reduce = launchOf(ready, "reduce");
  ASSERT_NE(reduce, nullptr);
  ASSERT_EQ(reduce->task.inputs.size(), 2u);
  EXPECT_EQ(reduce->task.inputs[0].id, "b0");
  EXPECT_EQ(reduce->task.inputs[0].url, urlOf("a", "b0"));
  EXPECT_EQ(reduce->task.inputs[0].size, 42u);
  EXPECT_EQ(reduce->task.inputs[0].checksum, "xxh64:00000000000000aa");
  EXPECT_EQ(reduce->task.inputs[1].url, urlOf("a", "b1"));
  EXPECT_EQ(scheduler_.progress().waiting_for_inputs, 0u);
}

TEST_F(BlockSchedulingTest, FallbackBlockIsReadThroughALiveActiveAgentsBlockServer) {
  addBlockAgent("a", 1);
  addBlockAgent("b", 1);
  Actions out;
  report("a", {block("b0", ""), block("b1", "")}, {"b0", "b1"}, out);
  ASSERT_EQ(scheduler_.blocks().heldBy(""), 2u);
  EXPECT_EQ(scheduler_.blocks().heldBy("a"), 0u);
  scheduler_.decommissionAgent("a");

  JobSpec j =
      job({mapTask("map-0", {"b0"}), mapTask("map-1", {"b1"}), reduceTask("reduce", {"b0", "b1"})});
  scheduler_.submit(std::move(j), now_, out);
  // The maps have not run in this job, but their blocks are known already: whichever task
  // fits first runs. Drive until the reduce launches.
  const Action* reduce = launchOf(out, "reduce");
  for (int round = 0; reduce == nullptr && round < 3; ++round) {
    Actions next;
    for (const auto& l : launches(out)) {
      scheduler_.onStatusUpdate(l.agent_id, status(l, TaskState::kFinished), now_, next);
    }
    out = next;
    reduce = launchOf(out, "reduce");
  }
  ASSERT_NE(reduce, nullptr);
  EXPECT_EQ(reduce->agent_id, "b");
  // Not through "a": it is decommissioning.
  EXPECT_EQ(reduce->task.inputs[0].url, "http://b:7337/blocks/b0");
  EXPECT_EQ(reduce->task.inputs[1].url, "http://b:7337/blocks/b1");
}

TEST_F(BlockSchedulingTest, FallbackBlockWaitsWhileNoActiveAgentHasABlockServer) {
  addAgent("plain", 2);  // no block_url
  Actions out;
  report("plain", {block("b0", "")}, {}, out);
  scheduler_.submit(job({mapTask("map-0", {"b0"}), reduceTask("reduce", {"b0"})}), now_, out);
  EXPECT_EQ(launchOf(out, "reduce"), nullptr);
  addBlockAgent("reader", 1);
  // Now the block can be read: the reduce runs (on "plain", which has a core left) and
  // reads b0 through the new agent's block server.
  const Action* reduce = launchOf(pending_, "reduce");
  ASSERT_NE(reduce, nullptr);
  EXPECT_EQ(reduce->task.inputs[0].url, "http://reader:7337/blocks/b0");
}

TEST_F(BlockSchedulingTest, BlockOnADecommissioningAgentIsReadOnlyOnceItMoved) {
  addBlockAgent("a", 2);
  addBlockAgent("b", 1);
  Actions out;
  report("b", {block("b0", "b")}, {}, out);
  scheduler_.decommissionAgent("b");
  scheduler_.submit(job({mapTask("map-0", {"b0"}), reduceTask("reduce", {"b0"})}), now_, out);
  EXPECT_EQ(launchOf(out, "reduce"), nullptr) << "b is leaving: do not race its exit";
  EXPECT_EQ(scheduler_.progress().waiting_for_inputs, 1u);

  // b migrates the block to a and says so.
  Actions moved;
  report("b", {block("b0", "a")}, {"b0"}, moved);
  const Action* reduce = launchOf(moved, "reduce");
  ASSERT_NE(reduce, nullptr);
  EXPECT_EQ(reduce->task.inputs[0].url, urlOf("a", "b0"));
}

TEST_F(BlockSchedulingTest, TargetsOwnCopyIsPreferred) {
  addBlockAgent("a", 1);
  addBlockAgent("b", 2);
  Actions out;
  report("a", {block("b0", "a")}, {}, out);
  report("b", {block("b0", "b")}, {}, out);
  scheduler_.submit(job({mapTask("map-0", {"b0"}), reduceTask("reduce", {"b0"})}), now_, out);
  const Action* reduce = launchOf(out, "reduce");
  ASSERT_NE(reduce, nullptr);
  EXPECT_EQ(reduce->task.inputs[0].url, urlOf(reduce->agent_id, "b0"));
}

TEST_F(BlockSchedulingTest, LostBlockRerunsItsProducerThenTheConsumerProceeds) {
  addBlockAgent("a", 2);
  addBlockAgent("b", 2);
  Actions out;
  scheduler_.submit(twoStage(), now_, out);
  const Action map0 = *launchOf(out, "map-0");
  const Action map1 = *launchOf(out, "map-1");
  Actions step;
  scheduler_.onStatusUpdate(map0.agent_id, status(map0, TaskState::kFinished), now_, step);
  report(map0.agent_id, {block("b0", map0.agent_id)}, {}, step);
  ASSERT_NE(map0.agent_id, map1.agent_id) << "the maps spread over both agents";

  // map-0's agent dies before the reduce could read b0.
  Actions after_loss;
  ASSERT_TRUE(scheduler_.removeAgent(map0.agent_id, "connection closed", after_loss));
  EXPECT_EQ(scheduler_.progress().reruns_for_lost_blocks, 1u);
  const Action* rerun = launchOf(after_loss, "map-0");
  ASSERT_NE(rerun, nullptr) << "map-0 runs again on the surviving agent";
  EXPECT_EQ(rerun->agent_id, map1.agent_id);
  EXPECT_EQ(rerun->task.attempt, 1);

  Actions finish;
  scheduler_.onStatusUpdate(map1.agent_id, status(map1, TaskState::kFinished), now_, finish);
  report(map1.agent_id, {block("b1", map1.agent_id)}, {}, finish);
  scheduler_.onStatusUpdate(rerun->agent_id, status(*rerun, TaskState::kFinished), now_, finish);
  EXPECT_EQ(launchOf(finish, "reduce"), nullptr) << "b0 is not reported again yet";
  report(rerun->agent_id, {block("b0", rerun->agent_id)}, {}, finish);
  const Action* reduce = launchOf(finish, "reduce");
  ASSERT_NE(reduce, nullptr);
  EXPECT_EQ(reduce->task.inputs[0].url, urlOf(map1.agent_id, "b0"));

  Actions end;
  scheduler_.onStatusUpdate(reduce->agent_id, status(*reduce, TaskState::kFinished), now_, end);
  EXPECT_EQ(scheduler_.jobState(), JobState::kSucceeded);
  EXPECT_EQ(scheduler_.progress().finished, 3u);
  EXPECT_EQ(scheduler_.progress().reruns_for_lost_blocks, 1u);
}

// The reduce of twoStage() launched after both maps finished on `a` and `b` (map-0 on `a`).
struct TwoStageRun {
  Action map0, map1, reduce;
};

protocol::StatusUpdate fetchFailed(const Action& launch, const std::string& block_id) {
  protocol::StatusUpdate s = status(launch, TaskState::kFailed);
  for (const auto& input : launch.task.inputs) {
    if (input.id == block_id)
      s.fetch_failed = protocol::FetchFailure{.block_id = block_id, .url = input.url};
  }
  s.reason = "cannot fetch input block " + block_id + ": 404 not here";
  return s;
}

class FetchFailureTest : public BlockSchedulingTest {
 protected:
  TwoStageRun runToReduce(int max_attempts = 0) {
    addBlockAgent("a", 1);
    addBlockAgent("b", 1);
    Actions out;
    JobSpec j = twoStage();
    j.max_attempts = max_attempts;
    scheduler_.submit(std::move(j), now_, out);
    TwoStageRun run{*launchOf(out, "map-0"), *launchOf(out, "map-1"), {}};
    Actions step;
    for (const Action* map : {&run.map0, &run.map1}) {
      scheduler_.onStatusUpdate(map->agent_id, status(*map, TaskState::kFinished), now_, step);
      report(map->agent_id, {block(map->task.name == "map-0" ? "b0" : "b1", map->agent_id)}, {},
             step);
    }
    const Action* reduce = launchOf(step, "reduce");
    EXPECT_NE(reduce, nullptr);
    if (reduce != nullptr) run.reduce = *reduce;
    return run;
  }
};

TEST_F(FetchFailureTest, AnUnfetchableBlockRerunsItsProducerAndTheReaderRunsAfter) {
  TwoStageRun run = runToReduce();
  ASSERT_EQ(run.reduce.task.inputs.size(), 2u);

  Actions after;
  scheduler_.onStatusUpdate(run.reduce.agent_id, fetchFailed(run.reduce, "b0"), now_, after);
  EXPECT_EQ(scheduler_.jobState(), JobState::kRunning);
  EXPECT_EQ(scheduler_.blocks().find("b0"), nullptr) << "its only holder does not have it";
  EXPECT_NE(scheduler_.blocks().find("b1"), nullptr);
  const Action* rerun = launchOf(after, "map-0");
  ASSERT_NE(rerun, nullptr) << "the map that made b0 runs again";
  EXPECT_EQ(launchOf(after, "map-1"), nullptr);
  EXPECT_EQ(launchOf(after, "reduce"), nullptr) << "the reader waits for b0";
  Progress p = scheduler_.progress();
  EXPECT_EQ(p.reruns_for_lost_blocks, 1u);
  EXPECT_EQ(p.fetch_failures, 1u);
  EXPECT_EQ(p.retries, 0u) << "a fetch failure is no failed attempt";
  EXPECT_EQ(p.waiting_for_inputs, 1u);

  Actions again;
  scheduler_.onStatusUpdate(rerun->agent_id, status(*rerun, TaskState::kFinished), now_, again);
  report(rerun->agent_id, {block("b0", rerun->agent_id)}, {}, again);
  const Action* reduce = launchOf(again, "reduce");
  ASSERT_NE(reduce, nullptr);
  EXPECT_EQ(reduce->task.attempt, 1);
  Actions end;
  scheduler_.onStatusUpdate(reduce->agent_id, status(*reduce, TaskState::kFinished), now_, end);
  EXPECT_EQ(scheduler_.jobState(), JobState::kSucceeded);
  EXPECT_EQ(scheduler_.tasks()[2].failures, 0);
}

TEST_F(FetchFailureTest, ABlockWithAnotherHolderIsReadFromThatOneWithoutARerun) {
  TwoStageRun run = runToReduce();
  Actions copy;
  report("b", {block("b0", "b")}, {}, copy);  // b0 now lives on a and b
  Actions after;
  protocol::StatusUpdate failed = fetchFailed(run.reduce, "b0");
  failed.fetch_failed->url = urlOf("a", "b0");
  scheduler_.onStatusUpdate(run.reduce.agent_id, failed, now_, after);
  EXPECT_EQ(scheduler_.progress().reruns_for_lost_blocks, 0u);
  EXPECT_EQ(launchOf(after, "map-0"), nullptr);
  const Action* reduce = launchOf(after, "reduce");
  ASSERT_NE(reduce, nullptr) << "b0 can still be read from b";
  EXPECT_EQ(reduce->task.inputs[0].url, urlOf("b", "b0"));
}

TEST_F(FetchFailureTest, AFallbackBlockThatCannotBeReadIsLost) {
  TwoStageRun run = runToReduce();
  Actions moved;
  report("a", {block("b0", "")}, {"b0"}, moved);  // b0 went to the fallback store
  protocol::StatusUpdate failed = fetchFailed(run.reduce, "b0");
  failed.fetch_failed->url = "http://b:7337/blocks/b0";  // read through b's block server
  Actions after;
  scheduler_.onStatusUpdate(run.reduce.agent_id, failed, now_, after);
  EXPECT_EQ(scheduler_.blocks().find("b0"), nullptr);
  EXPECT_NE(launchOf(after, "map-0"), nullptr);
}

// A block a migration put in an external store (no holder agent, an http(s) URL): readers
// GET that URL, whichever agent they run on; a reader that cannot makes the block lost there
// and its map runs again, as for any other holder.
TEST_F(FetchFailureTest, AnExternalStoresBlockIsReadAtItsUrlAndRerunWhenItCannotBe) {
  TwoStageRun run = runToReduce();
  Actions moved;
  protocol::BlockInfo external = block("b0", "");
  external.url = "https://store.example:8443/dockhand/b0";
  report("a", {external}, {"b0"}, moved);  // a moved b0 out to the store
  EXPECT_EQ(scheduler_.blocks().countByHolder().external, 1u);
  EXPECT_EQ(scheduler_.blocks().countByHolder().fallback, 0u);

  Actions after;
  scheduler_.onStatusUpdate(run.reduce.agent_id, fetchFailed(run.reduce, "b1"), now_, after);
  Actions again;
  const Action* map1 = launchOf(after, "map-1");
  ASSERT_NE(map1, nullptr);
  scheduler_.onStatusUpdate(map1->agent_id, status(*map1, TaskState::kFinished), now_, again);
  report(map1->agent_id, {block("b1", map1->agent_id)}, {}, again);
  const Action* reduce = launchOf(again, "reduce");
  ASSERT_NE(reduce, nullptr);
  EXPECT_EQ(reduce->task.inputs[0].url, "https://store.example:8443/dockhand/b0")
      << "read at the store, not through a block server";

  Actions lost;
  scheduler_.onStatusUpdate(reduce->agent_id, fetchFailed(*reduce, "b0"), now_, lost);
  EXPECT_EQ(scheduler_.blocks().find("b0"), nullptr);
  EXPECT_NE(launchOf(lost, "map-0"), nullptr) << "the map that made b0 runs again";
  EXPECT_EQ(scheduler_.jobState(), JobState::kRunning);
}

TEST_F(FetchFailureTest, TheSameBlockFailingMaxAttemptsTimesFailsTheJob) {
  TwoStageRun run = runToReduce(2);
  Action reduce = run.reduce;
  for (int round = 1; round <= 2; ++round) {
    Actions after;
    scheduler_.onStatusUpdate(reduce.agent_id, fetchFailed(reduce, "b0"), now_, after);
    if (round == 2) break;
    const Action* rerun = launchOf(after, "map-0");
    ASSERT_NE(rerun, nullptr);
    Actions again;
    scheduler_.onStatusUpdate(rerun->agent_id, status(*rerun, TaskState::kFinished), now_, again);
    report(rerun->agent_id, {block("b0", rerun->agent_id)}, {}, again);
    ASSERT_NE(launchOf(again, "reduce"), nullptr);
    reduce = *launchOf(again, "reduce");
  }
  EXPECT_EQ(scheduler_.jobState(), JobState::kFailed);
  EXPECT_NE(scheduler_.failureReason().find("could not fetch block b0 2 time(s)"),
            std::string::npos)
      << scheduler_.failureReason();
}

TEST_F(BlockSchedulingTest, LostBlockWhoseReadersAllFinishedIsNotRecomputed) {
  addBlockAgent("a", 1);
  addBlockAgent("b", 1);
  Actions out;
  scheduler_.submit(job({mapTask("map-0", {"b0"}), reduceTask("reduce", {"b0"}), task("other")}),
                    now_, out);
  const Action map0 = *launchOf(out, "map-0");
  Actions step;
  scheduler_.onStatusUpdate(map0.agent_id, status(map0, TaskState::kFinished), now_, step);
  report(map0.agent_id, {block("b0", map0.agent_id)}, {}, step);
  const Action* reduce = launchOf(step, "reduce");
  ASSERT_NE(reduce, nullptr);
  const Action reduce_launch = *reduce;
  Actions done;
  scheduler_.onStatusUpdate(reduce_launch.agent_id, status(reduce_launch, TaskState::kFinished),
                            now_, done);
  ASSERT_EQ(scheduler_.jobState(), JobState::kRunning) << "'other' still runs";
  Actions after;
  report(map0.agent_id, {}, {"b0"}, after);
  EXPECT_EQ(scheduler_.progress().reruns_for_lost_blocks, 0u);
  EXPECT_EQ(launchOf(after, "map-0"), nullptr);
}

TEST_F(BlockSchedulingTest, ALargeClusterIsOfferedInSlicesThatCoverIt) {
  const std::size_t limit = defaults::kMaxPeersOffered;
  const std::size_t agents = limit + 6;
  for (std::size_t i = 0; i < agents; ++i) addBlockAgent(fmt::format("a{:03}", i), 1);
  std::set<std::string> seen;
  std::vector<std::string> first;
  for (int ask = 0; ask < 2; ++ask) {
    auto peers = scheduler_.peersFor("a000");
    ASSERT_EQ(peers.size(), limit) << "a reply does not grow with the cluster";
    for (const auto& p : peers) {
      EXPECT_NE(p.executor_id, "a000") << "never the asker";
      seen.insert(p.executor_id);
      if (ask == 0) first.push_back(p.executor_id);
    }
  }
  EXPECT_EQ(seen.size(), agents - 1) << "two asks together offer every other agent";
  EXPECT_NE(scheduler_.peersFor("a001")[0].executor_id, first[0])
      << "the next asker starts elsewhere";
}

TEST_F(BlockSchedulingTest, DecommissioningAgentGetsNoTasksAndIsNoPeer) {
  addBlockAgent("a", 2);
  addBlockAgent("b", 2);
  addBlockAgent("c", 2);
  auto peer_ids = [&](const std::string& asker) {
    std::vector<std::string> ids;
    for (const auto& p : scheduler_.peersFor(asker)) ids.push_back(p.executor_id);
    return ids;
  };
  EXPECT_EQ(peer_ids("a"), (std::vector<std::string>{"b", "c"}));
  ASSERT_EQ(scheduler_.peersFor("a")[0].block_url, "http://b:7337/");

  ASSERT_TRUE(scheduler_.decommissionAgent("a"));
  EXPECT_EQ(scheduler_.agent("a")->state, AgentState::kDecommissioning);
  EXPECT_EQ(peer_ids("a"), (std::vector<std::string>{"b", "c"}));
  EXPECT_EQ(peer_ids("b"), (std::vector<std::string>{"c"})) << "a is leaving";

  Actions out;
  scheduler_.submit(job({task("t0"), task("t1"), task("t2"), task("t3"), task("t4")}), now_, out);
  auto l = launches(out);
  EXPECT_EQ(l.size(), 4u);
  for (const auto& a : l) EXPECT_NE(a.agent_id, "a");

  // A lost agent is no peer either (it is gone from the registry).
  Actions lost;
  ASSERT_TRUE(scheduler_.removeAgent("c", "connection closed", lost));
  EXPECT_EQ(peer_ids("b"), std::vector<std::string>{});
  // An agent without a block server is never offered.
  addAgent("plain", 1);
  EXPECT_EQ(peer_ids("b"), std::vector<std::string>{});
}

TEST_F(BlockSchedulingTest, CleanLeaveAfterMigrationReschedulesNothing) {
  addBlockAgent("a", 2);
  addBlockAgent("b", 2);
  Actions out;
  scheduler_.submit(twoStage(), now_, out);
  const Action map0 = *launchOf(out, "map-0");
  const Action map1 = *launchOf(out, "map-1");
  const std::string leaving = map0.agent_id;
  const std::string staying = map1.agent_id;
  ASSERT_NE(leaving, staying);
  scheduler_.decommissionAgent(leaving);

  Actions step;
  scheduler_.onStatusUpdate(leaving, status(map0, TaskState::kFinished), now_, step);
  report(leaving, {block("b0", leaving)}, {}, step);
  // It migrates b0 to the other agent, tells the driver, and leaves.
  report(leaving, {block("b0", staying)}, {"b0"}, step);
  EXPECT_EQ(scheduler_.blocks().heldBy(leaving), 0u);
  Actions left;
  ASSERT_TRUE(scheduler_.removeAgent(leaving, "removed itself: decommission finished", left));
  EXPECT_TRUE(launches(left).empty());
  EXPECT_EQ(scheduler_.progress().reruns_for_lost_blocks, 0u);
  EXPECT_EQ(scheduler_.progress().relaunches_after_loss, 0u);

  Actions finish;
  scheduler_.onStatusUpdate(staying, status(map1, TaskState::kFinished), now_, finish);
  report(staying, {block("b1", staying)}, {}, finish);
  const Action* reduce = launchOf(finish, "reduce");
  ASSERT_NE(reduce, nullptr);
  EXPECT_EQ(reduce->task.inputs[0].url, urlOf(staying, "b0"));
  Actions end;
  scheduler_.onStatusUpdate(staying, status(*reduce, TaskState::kFinished), now_, end);
  EXPECT_EQ(scheduler_.jobState(), JobState::kSucceeded);
  EXPECT_EQ(scheduler_.progress().reruns_for_lost_blocks, 0u);
}

TEST_F(BlockSchedulingTest, FallbackBlocksOutliveTheirWriter) {
  addBlockAgent("a", 1);
  addBlockAgent("b", 1);
  Actions out;
  scheduler_.submit(job({mapTask("map-0", {"b0"}), reduceTask("reduce", {"b0"})}), now_, out);
  const Action map0 = *launchOf(out, "map-0");
  Actions step;
  scheduler_.onStatusUpdate(map0.agent_id, status(map0, TaskState::kFinished), now_, step);
  scheduler_.decommissionAgent(map0.agent_id);
  report(map0.agent_id, {block("b0", "")}, {"b0"}, step);
  Actions left;
  scheduler_.removeAgent(map0.agent_id, "removed itself: decommission finished", left);
  const Action* reduce = launchOf(step, "reduce");
  if (reduce == nullptr) reduce = launchOf(left, "reduce");
  ASSERT_NE(reduce, nullptr);
  const std::string other = map0.agent_id == "a" ? "b" : "a";
  EXPECT_EQ(reduce->agent_id, other);
  EXPECT_EQ(reduce->task.inputs[0].url, "http://" + other + ":7337/blocks/b0");
  EXPECT_EQ(scheduler_.progress().reruns_for_lost_blocks, 0u);
}

TEST_F(BlockSchedulingTest, HeartbeatProgressShowsForDecommissioningAgents) {
  addBlockAgent("a", 1);
  // As an agent writes it (protocol::toJson): the failed block is still there, so left.
  Json report = {{"state", "migrating"},   {"blocks_total", 4}, {"blocks_migrated", 1},
                 {"blocks_failed", 1},     {"blocks_left", 3},  {"bytes_total", 4096},
                 {"bytes_migrated", 1024}, {"bytes_left", 3072}};
  EXPECT_TRUE(scheduler_.noteDecommissionProgress("a", report));
  EXPECT_FALSE(scheduler_.noteDecommissionProgress("a", report)) << "same state: no news";
  scheduler_.decommissionAgent("a");
  Progress p = scheduler_.progress();
  ASSERT_EQ(p.decommissions.size(), 1u);
  EXPECT_EQ(p.decommissions[0].agent_id, "a");
  EXPECT_EQ(p.decommissions[0].state, "migrating");
  EXPECT_EQ(p.decommissions[0].blocksTotal(), 4u);
  EXPECT_EQ(p.decommissions[0].blocks_left, 3u);
  EXPECT_EQ(p.decommissions[0].blocks_migrated, 1u);
  EXPECT_EQ(p.decommissions[0].blocks_failed, 1u);
  EXPECT_EQ(p.decommissions[0].bytes_migrated, 1024u);
  report["state"] = "done";
  EXPECT_TRUE(scheduler_.noteDecommissionProgress("a", report));
}

}  // namespace
}  // namespace dockhand::driver
