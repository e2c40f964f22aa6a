// The task frames' direct writers (task_frames.h) against the tree codec: byte for byte the same
// text as encodeEnvelope(makeMessage(m)), for hand-picked messages (every optional field, the
// strings JSON escapes, invalid UTF-8, the integer limits) and for thousands generated from a
// fixed seed with every field filled at random.
#include "dockhand/protocol/task_frames.h"

#include <gtest/gtest.h>

#include <limits>
#include <string>

#include "dockhand/protocol/envelope.h"
#include "message_generator.h"

namespace dockhand::protocol {
namespace {

template <typename M>
std::string treeText(const M& message) {
  return encodeEnvelope(makeMessage(message));
}

LaunchTask smallLaunch() {
  LaunchTask launch;
  launch.task.task_id = 77777;
  launch.task.name = "task-77776";
  launch.task.partition = 77776;
  launch.task.runner = "library";
  launch.task.payload = {{"library", "bench"}, {"function", "noop"}};
  return launch;
}

StatusUpdate finished() {
  StatusUpdate update;
  update.executor_id = "agent-1";
  update.task_id = 123456;
  update.state = TaskState::kFinished;
  update.cpus = 1;
  update.result = {{"bytes", 0}, {"duration_ms", 0}, {"value", ""}};
  update.log_urls = {{"stdout", "http://127.0.0.1:7337/v1/tasks/123456/logs/stdout"},
                     {"stderr", "http://127.0.0.1:7337/v1/tasks/123456/logs/stderr"}};
  update.metrics.run_time_ms = 0;
  update.metrics.cpu_time_ms = 3;
  update.metrics.result_bytes = 0;
  return update;
}

TEST(TaskFramesTest, ALaunchTaskIsTheTreeCodecsText) {
  LaunchTask launch = smallLaunch();
  EXPECT_EQ(encodeLaunchTask(launch), treeText(launch));
  EXPECT_EQ(encodeLaunchTask(launch),
            R"({"body":{"task":{"attempt":0,"cpus":1,"name":"task-77776","partition":77776,)"
            R"("payload":{"function":"noop","library":"bench"},"runner":"library",)"
            R"("task_id":77777}},"type":"LaunchTask"})");
}

TEST(TaskFramesTest, EveryOptionalFieldOfALaunchTaskIsWrittenInPlace) {
  LaunchTask launch = smallLaunch();
  launch.task.attempt = 3;
  launch.task.cpus = 4;
  launch.task.resources = {{"gpu", {"0", "1"}}, {"fpga", {}}};
  launch.task.properties = {{"spark.app.id", "app-1"}, {"empty", ""}};
  launch.task.inputs = {{"shuffle_0_3_1", "http://10.0.0.7:7337/v1/blocks", 1024, "xxh64:00ff"},
                        {"rdd_2_0", "file:///srv/store/rdd_2_0", 0, ""}};
  EXPECT_EQ(encodeLaunchTask(launch), treeText(launch));

  launch.task.payload = nullptr;
  EXPECT_EQ(encodeLaunchTask(launch), treeText(launch));
  launch.task.payload = Json::array({1, "two", Json::object(), 3.5});
  EXPECT_EQ(encodeLaunchTask(launch), treeText(launch));
}

TEST(TaskFramesTest, StringsAreEscapedAndInvalidUtf8ReplacedAsTheTreeCodecDoes) {
  LaunchTask launch = smallLaunch();
  for (const std::string& text :
       {std::string("quote \" and backslash \\"), std::string("tab\tnew\nline\rcr\b\f"),
        std::string("nul \0 inside", 12), std::string("\x01\x1f\x7f"),
        std::string("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x9a\x80"), std::string("bad \xff\xfe end"),
        std::string("cut \xe2\x82"), std::string("/slash/ and </script>"), std::string()}) {
    launch.task.name = text;
    launch.task.runner = text;
    launch.task.properties = {{text, text}};
    launch.task.resources = {{text, {text}}};
    EXPECT_EQ(encodeLaunchTask(launch), treeText(launch)) << text;

    StatusUpdate update = finished();
    update.reason = text;
    update.stderr_tail = text;
    update.executor_id = text;
    update.log_urls = {{text, text}};
    update.fetch_failed = FetchFailure{text, text};
    EXPECT_EQ(encodeStatusUpdate(update), treeText(update)) << text;
  }
}

TEST(TaskFramesTest, IntegersAtTheirLimits) {
  LaunchTask launch = smallLaunch();
  launch.task.task_id = std::numeric_limits<std::uint64_t>::max();
  launch.task.attempt = std::numeric_limits<int>::min();
  launch.task.partition = std::numeric_limits<int>::max();
  launch.task.cpus = -1;
  launch.task.inputs = {{"b", "u", std::numeric_limits<std::uint64_t>::max(), ""}};
  EXPECT_EQ(encodeLaunchTask(launch), treeText(launch));

  StatusUpdate update = finished();
  update.task_id = 0;
  update.exit_code = std::numeric_limits<int>::min();
  update.signal = 255;
  update.metrics.peak_rss_bytes = std::numeric_limits<std::uint64_t>::max();
  EXPECT_EQ(encodeStatusUpdate(update), treeText(update));
}

TEST(TaskFramesTest, AStatusUpdateIsTheTreeCodecsTextInEveryState) {
  StatusUpdate update = finished();
  EXPECT_EQ(encodeStatusUpdate(update), treeText(update));
  for (TaskState state : {TaskState::kRunning, TaskState::kFinished, TaskState::kFailed,
                          TaskState::kKilled, TaskState::kLost}) {
    StatusUpdate bare;
    bare.executor_id = "agent-2";
    bare.task_id = 9;
    bare.state = state;
    EXPECT_EQ(encodeStatusUpdate(bare), treeText(bare)) << toString(state);
  }
}

TEST(TaskFramesTest, EveryOptionalFieldOfAStatusUpdateIsWrittenInPlace) {
  StatusUpdate update = finished();
  update.state = TaskState::kFailed;
  update.reason = "exit code 3";
  update.exit_code = 3;
  update.signal = 9;
  update.stderr_tail = "Traceback (most recent call last):\n  ...";
  update.resources = {{"gpu", {"0"}}};
  update.fetch_failed = FetchFailure{"shuffle_0_1_2", "http://10.0.0.8:7337/v1/blocks"};
  update.result = "a string result";
  update.metrics.peak_rss_bytes = 1 << 20;
  update.metrics.io_read_bytes = 10;
  update.metrics.io_write_bytes = 20;
  update.metrics.input_blocks = 2;
  update.metrics.input_bytes = 2048;
  update.metrics.input_fetch_ms = 5;
  update.metrics.output_blocks = 1;
  update.metrics.output_bytes = 512;
  update.metrics.custom = {{"rows", 10.0}, {"ratio", 0.25}, {"big", 1e300}};
  EXPECT_EQ(encodeStatusUpdate(update), treeText(update));

  update.metrics = TaskMetrics{};
  update.metrics.custom = {{"only", 1.5}};  // custom alone
  EXPECT_EQ(encodeStatusUpdate(update), treeText(update));
}

TEST(TaskFramesTest, ThousandsOfGeneratedMessagesAreTheTreeCodecsText) {
  MessageGenerator generate(20261207);
  for (int i = 0; i < 3000; ++i) {
    const LaunchTask launch = generate.launch();
    ASSERT_EQ(encodeLaunchTask(launch), treeText(launch)) << "message " << i;
    const StatusUpdate update = generate.status();
    ASSERT_EQ(encodeStatusUpdate(update), treeText(update)) << "message " << i;
  }
}

}  // namespace
}  // namespace dockhand::protocol
