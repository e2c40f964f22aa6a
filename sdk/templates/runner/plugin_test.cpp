// Loads the built runner (its path is the first argument) with no agent: one task finishes,
// one is killed, a bad payload is refused. Exits 0 when all three behave.
#include <cstdio>
#include <exception>
#include <string>

#include <dockhand/plugin_test.hpp>

namespace {

std::string task(int id, const std::string& payload) {
  return R"({"task_id": )" + std::to_string(id) + R"(, "name": "t)" + std::to_string(id) +
         R"(", "work_dir": "/tmp", "payload": )" + payload + "}";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s PLUGIN_FILE\n", argv[0]);
    return 2;
  }
  try {
    dockhand::sdk::testing::PluginUnderTest plugin(argv[1], R"({"max_ms": 10000})");
    plugin.launch(task(1, R"({"ms": 10})"));
    if (!plugin.waitForEnd(1, 5000) || plugin.statuses(1).back().state != DH_TASK_FINISHED) {
      std::fprintf(stderr, "FAIL: task 1 did not finish\n");
      return 1;
    }
    plugin.launch(task(2, R"({"ms": 10000})"));
    plugin.kill(2, false, "stage cancelled");
    if (!plugin.waitForEnd(2, 5000) || plugin.statuses(2).back().state != DH_TASK_KILLED) {
      std::fprintf(stderr, "FAIL: task 2 was not killed\n");
      return 1;
    }
    try {
      plugin.launch(task(3, R"({"ms": 99999999})"));
      std::fprintf(stderr, "FAIL: a payload above max_ms was taken\n");
      return 1;
    } catch (const std::runtime_error&) {
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "FAIL: %s\n", e.what());
    return 1;
  }
  std::puts("ok");
  return 0;
}
