// readStatusUpdateFrame (task_frames.h) against the tree codec: every frame the agent's writer
// writes (and the tree reads) is read, into the message the tree reads; whatever it does not read
// (an id, a key it does not know, a number the tree would convert, a frame too deep) it leaves to
// the tree; and for thousands of frames mutated at random, whatever it reads the tree reads the
// same.
#include <gtest/gtest.h>

#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "dockhand/protocol/envelope.h"
#include "dockhand/protocol/task_frames.h"
#include "message_generator.h"

namespace dockhand::protocol {
namespace {

constexpr std::size_t kLimit = kDefaultMaxFrameBytes;

// The tree codec's reading of a frame as a plain StatusUpdate message, or nullopt where it reads
// something else or refuses it.
std::optional<StatusUpdate> treeRead(std::string_view frame) {
  DecodeResult env = decodeEnvelope(frame, kLimit);
  if (!env || env.value().type != "StatusUpdate" || env.value().id != 0) return std::nullopt;
  try {
    return decodeBody<StatusUpdate>(env.value().body);
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

std::string framed(std::string_view body) {
  return R"({"body":{)" + std::string(body) + R"(},"type":"StatusUpdate"})";
}

constexpr std::string_view kRequired = R"("executor_id":"a1","state":"FINISHED","task_id":7)";

TEST(StatusSaxTest, ReadsAFinishedTaskAsTheTreeCodecDoes) {
  const std::string frame = framed(
      R"("cpus":1,"executor_id":"agent-1","log_urls":{"stderr":"http://h/e","stdout":"http://h/o"},)"
      R"("metrics":{"cpu_time_ms":3,"result_bytes":0,"run_time_ms":0},)"
      R"("result":{"bytes":0,"duration_ms":0,"nested":[1,-2,0.5,"x",null,true,{"k":[]}],"value":""},)"
      R"("state":"FINISHED","task_id":123456)");
  const auto fast = readStatusUpdateFrame(frame, kLimit);
  ASSERT_TRUE(fast.has_value());
  EXPECT_EQ(*fast, treeRead(frame).value());
  EXPECT_EQ(fast->executor_id, "agent-1");
  EXPECT_EQ(fast->task_id, 123456U);
  EXPECT_EQ(fast->state, TaskState::kFinished);
  EXPECT_EQ(fast->result["nested"][6]["k"], Json::array());
  EXPECT_EQ(fast->metrics.cpu_time_ms, 3U);
  EXPECT_EQ(fast->log_urls.at("stdout"), "http://h/o");
}

TEST(StatusSaxTest, ReadsWhatTheTreeReadsAsAbsentOrDropped) {
  // Null members, a null list of addresses, a negative or null figure, custom figures that
  // are not non-negative numbers, a repeated name inside a map (the last one counts).
  for (const std::string& body : {
           std::string(kRequired) + R"(,"reason":null,"exit_code":null,"log_urls":null)",
           std::string(kRequired) + R"(,"resources":{"gpu":null,"fpga":["0"],"fpga":["1","2"]})",
           std::string(kRequired) + R"(,"metrics":{"cpu_time_ms":-1,"run_time_ms":null})",
           std::string(kRequired) +
               R"(,"metrics":{"custom":{"a":-1,"b":"x","c":null,"d":2.5,"e":3,"f":-0.0}})",
           std::string(kRequired) + R"(,"metrics":{"custom":null,"output_blocks":2})",
           std::string(kRequired) + R"(,"log_urls":{"stdout":"a","stdout":"b"})",
           std::string(kRequired) + R"(,"result":{"k":1,"k":[2]})",
           std::string(kRequired) + R"(,"fetch_failed":{"block_id":"b","url":null})",
           std::string(kRequired) + R"(,"exit_code":-2147483647,"signal":255,"cpus":2147483647)",
       }) {
    const std::string frame = framed(body);
    const auto fast = readStatusUpdateFrame(frame, kLimit);
    ASSERT_TRUE(fast.has_value()) << frame;
    EXPECT_EQ(*fast, treeRead(frame).value()) << frame;
  }
}

TEST(StatusSaxTest, LeavesWhatItDoesNotReadToTheTreeCodec) {
  const std::string deep =
      std::string(kRequired) + R"(,"result":)" + std::string(130, '[') + std::string(130, ']');
  for (const std::string& frame : std::vector<std::string>{
           R"({"body":{)" + std::string(kRequired) + R"(},"id":4,"type":"StatusUpdate"})",
           R"({"body":{)" + std::string(kRequired) + R"(},"type":"Heartbeat"})",
           R"({"type":"StatusUpdate","body":{)" + std::string(kRequired) +
               R"(},"type":"StatusUpdate"})",
           R"({"type":"StatusUpdate"})",
           R"({"body":null,"type":"StatusUpdate"})",
           R"([{"body":{}}])",
           framed(R"("executor_id":"a1","state":"FINISHED")"),                // no task_id
           framed(R"("executor_id":"a1","state":"DONE","task_id":7)"),        // unknown state
           framed(R"("executor_id":"a1","state":"FINISHED","task_id":7.0)"),  // converted
           framed(R"("executor_id":"a1","state":"FINISHED","task_id":-0)"),
           framed(R"("executor_id":null,"state":"FINISHED","task_id":7)"),
           framed(std::string(kRequired) + R"(,"task_id":8)"),  // repeated
           framed(std::string(kRequired) + R"(,"future_member":1)"),
           framed(std::string(kRequired) + R"(,"cpus":1.0)"),
           framed(std::string(kRequired) + R"(,"cpus":2147483648)"),
           framed(std::string(kRequired) + R"(,"signal":256)"),
           framed(std::string(kRequired) + R"(,"exit_code":-2147483648)"),
           framed(std::string(kRequired) + R"(,"metrics":{"cpu_time_ms":1.5})"),
           framed(std::string(kRequired) + R"(,"metrics":{"cpu_time_ms":1,"cpu_time_ms":2})"),
           framed(std::string(kRequired) + R"(,"metrics":{"new_figure":1})"),
           framed(std::string(kRequired) + R"(,"metrics":[])"),
           framed(std::string(kRequired) + R"(,"metrics":{"custom":{"a":1,"a":2}})"),
           framed(std::string(kRequired) + R"(,"log_urls":{"stdout":null})"),
           framed(std::string(kRequired) + R"(,"resources":{"gpu":[0]})"),
           framed(std::string(kRequired) + R"(,"fetch_failed":{"url":"u"})"),
           framed(std::string(kRequired) + R"(,"fetch_failed":{"block_id":"b","extra":1})"),
           framed(deep),
           framed(kRequired) + "x",
           framed(kRequired).substr(0, 40),
           [] {
             std::string nul = framed(kRequired);
             nul[nul.find("a1") + 1] = '\0';
             return nul;
           }(),
           std::string(),
       }) {
    EXPECT_FALSE(readStatusUpdateFrame(frame, kLimit).has_value()) << frame;
  }
  EXPECT_TRUE(readStatusUpdateFrame(framed(kRequired), kLimit).has_value());
  EXPECT_FALSE(readStatusUpdateFrame(framed(kRequired), framed(kRequired).size() - 1).has_value());
}

// Generated frames (some with values the tree refuses: a negative cpus, an exit code of INT_MIN):
// each one the tree reads is read, into the same message; each one it refuses is left to it.
TEST(StatusSaxTest, ReadsEveryGeneratedFrameTheTreeCodecReads) {
  MessageGenerator generate(20261208);
  int read = 0;
  for (int i = 0; i < 3000; ++i) {
    const std::string frame = encodeStatusUpdate(generate.status());
    const auto tree = treeRead(frame);
    const auto fast = readStatusUpdateFrame(frame, kLimit);
    ASSERT_EQ(fast.has_value(), tree.has_value()) << "message " << i << ": " << frame;
    if (!tree) continue;
    ++read;
    ASSERT_EQ(*fast, *tree) << "message " << i << ": " << frame;
  }
  EXPECT_GT(read, 1000);
}

// Frames with a byte changed, removed or added where it matters to JSON: whatever the direct
// reader reads, the tree reads the same; and it still reads many of them (the test would pass
// for a reader that read nothing otherwise).
TEST(StatusSaxTest, WhatItReadsOfMutatedFramesTheTreeReadsTheSame) {
  MessageGenerator generate(7);
  std::mt19937 rng(11);
  constexpr std::string_view kBytes = "{}[]\":,0-19.eE nulltruefalse\\a";
  int read = 0;
  for (int i = 0; i < 6000; ++i) {
    std::string frame = encodeStatusUpdate(generate.status());
    const int edits = std::uniform_int_distribution<int>(1, 2)(rng);
    for (int e = 0; e < edits && !frame.empty(); ++e) {
      const std::size_t at = std::uniform_int_distribution<std::size_t>(0, frame.size() - 1)(rng);
      const char c = kBytes[std::uniform_int_distribution<std::size_t>(0, kBytes.size() - 1)(rng)];
      switch (std::uniform_int_distribution<int>(0, 2)(rng)) {
        case 0:
          frame[at] = c;
          break;
        case 1:
          frame.erase(at, 1);
          break;
        default:
          frame.insert(at, 1, c);
          break;
      }
    }
    const auto fast = readStatusUpdateFrame(frame, kLimit);
    if (!fast) continue;
    ++read;
    const auto tree = treeRead(frame);
    ASSERT_TRUE(tree.has_value()) << "frame " << i << ": " << frame;
    ASSERT_EQ(*fast, *tree) << "frame " << i << ": " << frame;
  }
  EXPECT_GT(read, 300);
}

}  // namespace
}  // namespace dockhand::protocol
