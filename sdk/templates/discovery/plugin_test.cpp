// Loads the built plugin (its path is the first argument) with no agent and asks it once for
// its resource and once for another. Exits 0 when both answers are right.
#include <cstdio>
#include <exception>
#include <string>

#include <dockhand/plugin_test.hpp>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s PLUGIN_FILE\n", argv[0]);
    return 2;
  }
  try {
    dockhand::sdk::testing::PluginUnderTest plugin(argv[1],
                                                   R"({"resource": "widget", "count": 2})");
    const std::string found = plugin.discover(R"({"name": "widget", "amount": 1})");
    if (found.find(R"("addresses": ["0", "1"])") == std::string::npos) {
      std::fprintf(stderr, "FAIL: discover(widget) answered %s\n", found.c_str());
      return 1;
    }
    const std::string other = plugin.discover(R"({"name": "gpu", "amount": 1})");
    if (!other.empty()) {
      std::fprintf(stderr, "FAIL: discover(gpu) should decline, answered %s\n", other.c_str());
      return 1;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "FAIL: %s\n", e.what());
    return 1;
  }
  std::puts("ok");
  return 0;
}
