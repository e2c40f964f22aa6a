// Task frames generated from a seed, every field present or absent at random, strings from an
// alphabet with the characters JSON escapes, multi-byte UTF-8 and invalid bytes: what the task
// frames' tests (task_frames_test, status_sax_test) hold the direct codec and the tree codec to.
#pragma once

#include <cstdint>
#include <iterator>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "dockhand/protocol/messages.h"
#include "dockhand/protocol/usage.h"

namespace dockhand::protocol {

class MessageGenerator {
 public:
  explicit MessageGenerator(std::uint32_t seed) : rng_(seed) {}

  bool coin() { return std::uniform_int_distribution<int>(0, 1)(rng_) == 1; }

  template <class Int>
  Int number() {
    switch (std::uniform_int_distribution<int>(0, 3)(rng_)) {
      case 0:
        return 0;
      case 1:
        return std::numeric_limits<Int>::max();
      case 2:
        return std::numeric_limits<Int>::min();
      default:
        return std::uniform_int_distribution<Int>(std::numeric_limits<Int>::min(),
                                                  std::numeric_limits<Int>::max())(rng_);
    }
  }

  std::string text() {
    static const std::string kPieces[] = {"a",
                                          "Z",
                                          "0",
                                          " ",
                                          "\"",
                                          "\\",
                                          "\n",
                                          "\t",
                                          std::string(1, '\0'),
                                          "\x1f",
                                          "\x7f",
                                          "\xc3\xa9",
                                          "\xe2\x82\xac",
                                          "\xf0\x9f\x9a\x80",
                                          "\xff",
                                          "\xc3",
                                          "task",
                                          "/",
                                          "{",
                                          "}"};
    std::string out;
    const int length = std::uniform_int_distribution<int>(0, 12)(rng_);
    for (int i = 0; i < length; ++i) {
      out += kPieces[std::uniform_int_distribution<std::size_t>(0, std::size(kPieces) - 1)(rng_)];
    }
    return out;
  }

  std::map<std::string, std::string> stringMap() {
    std::map<std::string, std::string> map;
    const int size = std::uniform_int_distribution<int>(0, 3)(rng_);
    for (int i = 0; i < size; ++i) map[text()] = text();
    return map;
  }

  std::map<std::string, std::vector<std::string>> addressMap() {
    std::map<std::string, std::vector<std::string>> map;
    const int size = std::uniform_int_distribution<int>(0, 3)(rng_);
    for (int i = 0; i < size; ++i) {
      auto& addresses = map[text()];
      const int count = std::uniform_int_distribution<int>(0, 3)(rng_);
      for (int a = 0; a < count; ++a) addresses.push_back(text());
    }
    return map;
  }

  Json value() {
    switch (std::uniform_int_distribution<int>(0, 5)(rng_)) {
      case 0:
        return nullptr;
      case 1:
        return text();
      case 2:
        return number<std::int64_t>();
      case 3:
        return Json{{text(), text()}, {"n", number<std::uint64_t>()}, {"b", coin()}};
      case 4:
        return Json::array({text(), 0.5, Json::object()});
      default:
        return Json::object();
    }
  }

  LaunchTask launch() {
    LaunchTask launch;
    TaskDescription& task = launch.task;
    task.task_id = number<std::uint64_t>();
    task.attempt = number<int>();
    task.name = text();
    task.partition = number<int>();
    task.runner = text();
    task.cpus = number<int>();
    task.resources = addressMap();
    task.properties = stringMap();
    task.payload = value();
    const int inputs = std::uniform_int_distribution<int>(0, 2)(rng_);
    for (int i = 0; i < inputs; ++i) {
      task.inputs.push_back({text(), text(), number<std::uint64_t>(), text()});
    }
    return launch;
  }

  StatusUpdate status() {
    StatusUpdate update;
    update.executor_id = text();
    update.task_id = number<std::uint64_t>();
    update.state = static_cast<TaskState>(std::uniform_int_distribution<int>(0, 4)(rng_));
    if (coin()) update.result = value();
    if (coin()) update.reason = text();
    if (coin()) update.exit_code = number<int>();
    if (coin()) update.signal = std::uniform_int_distribution<int>(0, 255)(rng_);
    if (coin()) update.stderr_tail = text();
    update.cpus = number<int>();
    update.resources = addressMap();
    update.log_urls = stringMap();
    if (coin()) update.fetch_failed = FetchFailure{text(), text()};
    for (const auto& field : kTaskMetricFields) {
      if (coin()) update.metrics.*field.member = number<std::uint64_t>();
    }
    if (coin()) update.metrics.custom[text()] = 0.125 * number<int>();
    return update;
  }

 private:
  std::mt19937 rng_;
};

}  // namespace dockhand::protocol
