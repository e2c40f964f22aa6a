// Loads the built plugin (its path is the first argument) with no agent and migrates one block
// (a file made here, with its real checksum) and one whose checksum is wrong. Exits 0 when the
// first is copied and the second refused.
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <string>

#include <dockhand/checksum.hpp>
#include <dockhand/plugin_test.hpp>

namespace fs = std::filesystem;

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s PLUGIN_FILE\n", argv[0]);
    return 2;
  }
  char templ[] = "/tmp/@NAME@-test-XXXXXX";
  if (::mkdtemp(templ) == nullptr) return 2;
  const fs::path dir = templ;
  std::ofstream(dir / "rdd_1_0") << "block bytes";
  const std::string block = (dir / "rdd_1_0").string();
  int code = 0;
  try {
    dockhand::sdk::testing::PluginUnderTest plugin(
        argv[1], R"({"directory": ")" + (dir / "store").string() + R"("})");
    const std::string good = R"({"blocks": [{"id": "rdd_1_0", "path": ")" + block +
                             R"(", "size": 11, "checksum": ")" +
                             dockhand::sdk::checksumOf("block bytes") + R"("}], "peers": []})";
    const std::string answer = plugin.migrate(good);
    if (answer.find(R"("migrated": [{"id": "rdd_1_0"}])") == std::string::npos ||
        !fs::exists(dir / "store" / "rdd_1_0")) {
      std::fprintf(stderr, "FAIL: the block was not migrated: %s\n", answer.c_str());
      code = 1;
    }
    const std::string bad =
        R"({"blocks": [{"id": "rdd_1_1", "path": ")" + block +
        R"(", "size": 11, "checksum": "xxh64:0000000000000000"}], "peers": []})";
    const std::string refused = plugin.migrate(bad);
    if (refused.find(R"("failed": [{"id": "rdd_1_1")") == std::string::npos) {
      std::fprintf(stderr, "FAIL: a wrong copy was answered migrated: %s\n", refused.c_str());
      code = 1;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "FAIL: %s\n", e.what());
    code = 1;
  }
  fs::remove_all(dir);
  if (code == 0) std::puts("ok");
  return code;
}
