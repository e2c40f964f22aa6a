// A task's figures (usage.h): on the wire with StatusUpdate, and the one rule that reads
// them from a runner, a peer or an event log.
#include "dockhand/protocol/usage.h"

#include <gtest/gtest.h>

#include "dockhand/protocol/messages.h"

namespace dockhand::protocol {
namespace {

using nlohmann::json;

TEST(TaskMetricsTest, TravelWithATerminalStatusAndOnlyWhatWasMeasured) {
  StatusUpdate update;
  update.executor_id = "exec-1";
  update.task_id = 7;
  update.state = TaskState::kFinished;
  update.metrics.run_time_ms = 12;
  update.metrics.cpu_time_ms = 0;  // measured, and none: sent
  update.metrics.output_blocks = 2;
  update.metrics.output_bytes = 4096;
  update.metrics.custom["rows"] = 1500.5;
  const json wire = toJson(update);
  EXPECT_EQ(wire.at("metrics"), json::parse(R"({"run_time_ms": 12, "cpu_time_ms": 0,
      "output_blocks": 2, "output_bytes": 4096, "custom": {"rows": 1500.5}})"));
  EXPECT_EQ(fromJson(wire, Tag<StatusUpdate>{}).metrics, update.metrics);

  StatusUpdate running;
  running.executor_id = "exec-1";
  EXPECT_FALSE(toJson(running).contains("metrics"));
}

TEST(TaskMetricsTest, BadFiguresAreDroppedAndNamedNeverAnError) {
  std::vector<std::string> dropped;
  const auto metrics = taskMetricsFromJson(
      json::parse(R"({"cpu_time_ms": -5, "peak_rss_bytes": "big", "run_time_ms": 1.5,
          "result_bytes": 3, "from_a_newer_peer": 1,
          "custom": {"rows": 10, "bad": -1, "text": "x"}})"),
      &dropped);
  EXPECT_FALSE(metrics.cpu_time_ms);
  EXPECT_FALSE(metrics.peak_rss_bytes);
  EXPECT_FALSE(metrics.run_time_ms);
  EXPECT_EQ(metrics.result_bytes, 3u);
  EXPECT_EQ(metrics.custom, (std::map<std::string, double>{{"rows", 10}}));
  EXPECT_EQ(dropped, (std::vector<std::string>{
                         "run_time_ms: not an integer", "cpu_time_ms: negative",
                         "peak_rss_bytes: not an integer", "bad: negative", "text: not a number"}));

  dropped.clear();
  EXPECT_TRUE(taskMetricsFromJson(json::array(), &dropped).empty());
  EXPECT_EQ(dropped, std::vector<std::string>{"metrics: not an object"});

  // A peer's bad figure costs the figure, not the status.
  json wire = {{"executor_id", "exec-1"},
               {"task_id", 3},
               {"state", "FAILED"},
               {"metrics", {{"cpu_time_ms", "x"}, {"run_time_ms", 4}}}};
  const auto update = fromJson(wire, Tag<StatusUpdate>{});
  EXPECT_FALSE(update.metrics.cpu_time_ms);
  EXPECT_EQ(update.metrics.run_time_ms, 4u);
  wire["metrics"] = "nonsense";
  EXPECT_TRUE(fromJson(wire, Tag<StatusUpdate>{}).metrics.empty());
}

TEST(TaskMetricsTest, MergeKeepsWhatTheOtherDoesNotHave) {
  TaskMetrics runner;
  runner.cpu_time_ms = 40;
  runner.custom["rows"] = 1;
  TaskMetrics agent;
  agent.input_blocks = 2;
  agent.cpu_time_ms = 50;
  runner.merge(agent);
  EXPECT_EQ(runner.cpu_time_ms, 50u);
  EXPECT_EQ(runner.input_blocks, 2u);
  EXPECT_EQ(runner.custom.at("rows"), 1);
}

}  // namespace
}  // namespace dockhand::protocol
