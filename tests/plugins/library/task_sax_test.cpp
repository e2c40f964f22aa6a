// The library runner's two readers of task_json (library_config.h): parseTaskFast (no tree)
// against the tree path. Whatever the fast reader accepts, the tree reads the same; whatever the
// tree refuses, the fast reader declines (the tree then says why). Hand-picked task_json (the
// agent's own shape, args of every kind, each refusal) and thousands generated from a fixed seed.
#include <gtest/gtest.h>

#include <limits>
#include <optional>
#include <random>
#include <string>

#include <nlohmann/json.hpp>

#include "dockhand/plugin.hpp"
#include "library_config.h"

namespace dockhand::plugins::library {
namespace {

using nlohmann::json;

std::optional<TaskSpec> tree(const std::string& text) {
  try {
    return parseTaskTree(text);
  } catch (const sdk::Error&) {
    return std::nullopt;
  }
}

void expectSame(const TaskSpec& a, const TaskSpec& b, const std::string& text) {
  EXPECT_EQ(a.task_id, b.task_id) << text;
  EXPECT_EQ(a.attempt, b.attempt) << text;
  EXPECT_EQ(a.partition, b.partition) << text;
  EXPECT_EQ(a.work_dir, b.work_dir) << text;
  EXPECT_EQ(a.library, b.library) << text;
  EXPECT_EQ(a.function, b.function) << text;
  EXPECT_EQ(a.args, b.args) << text;
  EXPECT_EQ(a.inputs, b.inputs) << text;
}

// The fast reader accepts `text` and reads what the tree reads.
void expectRead(const std::string& text) {
  const std::optional<TaskSpec> fast = parseTaskFast(text);
  ASSERT_TRUE(fast.has_value()) << text;
  const std::optional<TaskSpec> slow = tree(text);
  ASSERT_TRUE(slow.has_value()) << text;
  expectSame(*fast, *slow, text);
}

json agentTask() {
  // As the agent writes it (runnerTaskJson), without env.
  return {{"attempt", 0},
          {"cpus", 1},
          {"name", "task-7"},
          {"partition", 7},
          {"payload", {{"library", "bench"}, {"function", "noop"}}},
          {"task_id", 8},
          {"work_dir", "/var/lib/dockhand/tasks/task-8"}};
}

TEST(TaskSaxTest, TheAgentsTaskJsonIsReadAsTheTreeReadsIt) {
  expectRead(agentTask().dump());
  json task = agentTask();
  task["inputs"] = {"shuffle_0_1_2", "rdd_3.0"};
  task["properties"] = {{"spark.app.id", "app-1"}};
  task["resources"] = {{"gpu", {"0", "1"}}};
  task["env"] = {{"DOCKHAND_TASK_ID", "8"}};
  task["attempt"] = 2;
  task["partition"] = -3;
  expectRead(task.dump());
  expectRead(task.dump(2));  // whitespace anywhere
  task["attempt"] = nullptr;
  task["partition"] = nullptr;
  task["inputs"] = nullptr;
  expectRead(task.dump());
}

TEST(TaskSaxTest, ArgsOfEveryKindAreKeptAsTheTreeDumpsThem) {
  for (const json& args :
       {json(nullptr), json(true), json(-5), json(18446744073709551615ULL), json(2.5),
        json("text with \"quotes\", \\ and \n, caf\u00e9"), json::array(), json::object(),
        json{{"rows", {1, 2, {{"deep", {nullptr, false}}}}}, {"name", "x"}},
        json::array({json::array({1}), json::array({2, json::object({{"k", "v"}})})})}) {
    json task = agentTask();
    task["payload"]["args"] = args;
    expectRead(task.dump());
  }
  // A key twice inside args: the last one, as in the tree.
  expectRead(
      R"({"task_id":1,"work_dir":"/w","payload":{"library":"l","function":"f","args":{"a":1,"a":2}}})");
}

TEST(TaskSaxTest, WhatTheTreeRefusesTheFastReaderDeclines) {
  for (
      const std::string& text : {
          std::string("not json"),
          std::string("[1]"),
          std::string(
              R"({"task_id":1,"work_dir":"/w","payload":{"library":"l","function":"f"}} x)"),
          std::string(R"({"work_dir":"/w","payload":{"library":"l","function":"f"}})"),
          std::string(R"({"task_id":-1,"work_dir":"/w","payload":{"library":"l","function":"f"}})"),
          std::string(
              R"({"task_id":"1","work_dir":"/w","payload":{"library":"l","function":"f"}})"),
          std::string(
              R"({"task_id":1.0,"work_dir":"/w","payload":{"library":"l","function":"f"}})"),
          std::string(R"({"task_id":1,"work_dir":"w","payload":{"library":"l","function":"f"}})"),
          std::string(R"({"task_id":1,"work_dir":"","payload":{"library":"l","function":"f"}})"),
          std::string(R"({"task_id":1,"payload":{"library":"l","function":"f"}})"),
          std::string(R"({"task_id":1,"work_dir":"/w","payload":"l:f"})"),
          std::string(R"({"task_id":1,"work_dir":"/w"})"),
          std::string(
              R"({"task_id":1,"work_dir":"/w","payload":{"library":"l","function":"f","x":1}})"),
          std::string(R"({"task_id":1,"work_dir":"/w","payload":{"library":"","function":"f"}})"),
          std::string(R"({"task_id":1,"work_dir":"/w","payload":{"library":"l"}})"),
          std::string(R"({"task_id":1,"work_dir":"/w","payload":{"library":"l","function":7}})"),
          std::string(
              R"({"task_id":1,"work_dir":"/w","attempt":-1,"payload":{"library":"l","function":"f"}})"),
          std::string(
              R"({"task_id":1,"work_dir":"/w","attempt":4294967296,"payload":{"library":"l","function":"f"}})"),
          std::string(
              R"({"task_id":1,"work_dir":"/w","partition":1.5,"payload":{"library":"l","function":"f"}})"),
          std::string(
              R"({"task_id":1,"work_dir":"/w","inputs":"a","payload":{"library":"l","function":"f"}})"),
          std::string(
              R"({"task_id":1,"work_dir":"/w","inputs":["../x"],"payload":{"library":"l","function":"f"}})"),
          std::string(
              R"({"task_id":1,"work_dir":"/w","inputs":[1],"payload":{"library":"l","function":"f"}})"),
      }) {
    EXPECT_FALSE(tree(text).has_value()) << "the tree should refuse: " << text;
    EXPECT_FALSE(parseTaskFast(text).has_value()) << text;
    // parseTask says what the tree says.
    EXPECT_THROW(parseTask(text), sdk::Error) << text;
  }
}

TEST(TaskSaxTest, WhatTheFastReaderDeclinesTheTreeStillReads) {
  // A known key twice (the tree keeps the last), a partition beyond int64: the tree decides.
  for (
      const std::string& text : {
          std::string(
              R"({"task_id":1,"task_id":2,"work_dir":"/w","payload":{"library":"l","function":"f"}})"),
          std::string(
              R"({"task_id":1,"work_dir":"/w","payload":{"library":"l","library":"m","function":"f"}})"),
          std::string(
              R"({"task_id":1,"work_dir":"/w","partition":18446744073709551615,"payload":{"library":"l","function":"f"}})"),
      }) {
    EXPECT_FALSE(parseTaskFast(text).has_value()) << text;
    const std::optional<TaskSpec> slow = tree(text);
    ASSERT_TRUE(slow.has_value()) << text;
    const TaskSpec read = parseTask(text);
    expectSame(read, *slow, text);
  }
}

// Task JSON generated with every field present, absent, null or of a wrong type at random.
class Generator {
 public:
  explicit Generator(std::uint32_t seed) : rng_(seed) {}

  int pick(int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng_); }

  json anyValue(int depth = 0) {
    switch (pick(depth > 2 ? 6 : 8)) {
      case 0:
        return nullptr;
      case 1:
        return pick(2) == 1;
      case 2:
        return -pick(1000);
      case 3:
        return static_cast<std::uint64_t>(pick(1000));
      case 4:
        return 0.5 * pick(10);
      case 5:
        return text();
      case 6: {
        json a = json::array();
        for (int i = pick(4); i > 0; --i) a.push_back(anyValue(depth + 1));
        return a;
      }
      default: {
        json o = json::object();
        for (int i = pick(4); i > 0; --i) o[text()] = anyValue(depth + 1);
        return o;
      }
    }
  }

  std::string text() {
    static const char* const kWords[] = {"a", "rdd_1", "task", "..", "x y", "\xc3\xa9", "\"", "/"};
    std::string out;
    for (int i = pick(3); i >= 0; --i) out += kWords[pick(8)];
    return out;
  }

  // Mostly well-formed, one field in a few wrong.
  json task() {
    json t = agentTask();
    const auto maybe = [&](const char* key, const json& good) {
      switch (pick(10)) {
        case 0:
          t.erase(key);
          break;
        case 1:
          t[key] = anyValue();
          break;
        default:
          t[key] = good;
      }
    };
    maybe("task_id", static_cast<std::uint64_t>(pick(1 << 30)));
    maybe("work_dir", "/work/tasks/task-" + std::to_string(pick(100)));
    maybe("attempt", pick(5));
    maybe("partition", pick(1000) - 10);
    if (pick(3) == 0) maybe("inputs", json::array({"shuffle_0_" + std::to_string(pick(9)), "b"}));
    json payload = {{"library", pick(10) == 0 ? json("") : json("lib")}, {"function", "fn"}};
    if (pick(2) == 0) payload["args"] = anyValue();
    if (pick(15) == 0) payload[text()] = 1;
    if (pick(15) == 0) payload.erase("function");
    maybe("payload", payload);
    if (pick(4) == 0) t[text()] = anyValue();  // an unknown key: not read
    return t;
  }

 private:
  std::mt19937 rng_;
};

TEST(TaskSaxTest, ThousandsOfGeneratedTaskJsonsReadTheSameOrAreLeftToTheTree) {
  Generator generate(20261207);
  int fast_reads = 0;
  for (int i = 0; i < 5000; ++i) {
    const std::string text = generate.task().dump();
    const std::optional<TaskSpec> fast = parseTaskFast(text);
    const std::optional<TaskSpec> slow = tree(text);
    if (fast) {
      ++fast_reads;
      ASSERT_TRUE(slow.has_value()) << "read fast, refused by the tree: " << text;
      expectSame(*fast, *slow, text);
      if (::testing::Test::HasFailure()) return;
    }
  }
  // Most generated task_json is well formed: the fast reader took a good part of it.
  EXPECT_GT(fast_reads, 1000);
}

}  // namespace
}  // namespace dockhand::plugins::library
