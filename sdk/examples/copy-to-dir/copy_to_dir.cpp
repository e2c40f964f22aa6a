// The `copy-to-dir` migration plugin: copies each block to {"directory": "/mnt/blocks"},
// first under a temporary name, then renamed, so a block is reported migrated only once a
// complete copy exists, and only once the copy's checksum is the block's (dockhand/checksum.hpp).
// Progress goes to the host after each block.
#include <atomic>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <system_error>

#include <dockhand/checksum.hpp>
#include <dockhand/plugin.hpp>

namespace fs = std::filesystem;

namespace {

std::string stringField(std::string_view json, std::string_view key, std::size_t from = 0) {
  const std::string needle = "\"" + std::string(key) + "\"";
  auto at = json.find(needle, from);
  if (at == std::string_view::npos) return {};
  at = json.find('"', json.find(':', at + needle.size()) + 1);
  const auto end = json.find('"', at + 1);
  return std::string(json.substr(at + 1, end - at - 1));
}

std::string jsonString(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

// The checksum of the file at `path` ("xxh64:..."), or "" when it cannot be read.
std::string checksumOfFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  dockhand::sdk::Xxh64 sum;
  char buffer[1 << 16];
  while (in.read(buffer, sizeof buffer) || in.gcount() > 0) {
    sum.update(buffer, static_cast<std::size_t>(in.gcount()));
  }
  return in.bad() || !in.eof() ? std::string() : sum.text();
}

}  // namespace

class CopyToDir : public dockhand::sdk::BlockMigration {
 public:
  static constexpr const char* kConfigSchema = R"({
    "type": "object",
    "properties": {"directory": {"type": "string", "minLength": 1}},
    "required": ["directory"],
    "additionalProperties": false
  })";

  CopyToDir(dockhand::sdk::Host host, std::string_view config_json)
      : host_(host), directory_(stringField(config_json, "directory")) {
    std::error_code ec;
    fs::create_directories(directory_, ec);
    if (ec) throw std::runtime_error("cannot create " + directory_.string() + ": " + ec.message());
  }

  // A migration thread; may block.
  // request: {"blocks": [{"id": ..., "path": ..., "size": N, "checksum": "xxh64:..."}], ...}
  std::string migrate(std::string_view request_json) override {
    std::string migrated;
    std::string failed;
    for (auto at = request_json.find("\"id\""); at != std::string_view::npos && !cancelled_;
         at = request_json.find("\"id\"", at + 1)) {
      // The block's object: its fields come in any order.
      const auto open = request_json.rfind('{', at);
      const std::string_view block = request_json.substr(open, request_json.find('}', at) - open);
      const std::string id = stringField(block, "id");
      const std::string path = stringField(block, "path");
      const std::string checksum = stringField(block, "checksum");
      const fs::path target = directory_ / id;
      const fs::path partial = directory_ / (id + ".partial");
      std::error_code ec;
      fs::copy_file(path, partial, fs::copy_options::overwrite_existing, ec);
      std::string reason = ec ? ec.message() : std::string();
      if (!ec && checksumOfFile(partial) != checksum) {
        reason = "the copy's checksum is not the block's " + checksum;
      }
      if (reason.empty()) fs::rename(partial, target, ec);
      if (ec) reason = ec.message();
      if (!reason.empty()) {
        fs::remove(partial, ec);
        failed += (failed.empty() ? "" : ", ") + std::string("{\"id\": ") + jsonString(id) +
                  ", \"reason\": " + jsonString(reason) + "}";
        continue;
      }
      migrated += (migrated.empty() ? "" : ", ") + std::string("{\"id\": ") + jsonString(id) +
                  ", \"location\": " + jsonString(target.string()) + "}";
      host_.migrationProgress("{\"block\": " + jsonString(id) + R"(, "done": true, "location": )" +
                              jsonString(target.string()) + "}");
    }
    return "{\"migrated\": [" + migrated + "], \"failed\": [" + failed + "]}";
  }

  // Any thread.
  void cancel() override { cancelled_ = true; }

 private:
  dockhand::sdk::Host host_;
  fs::path directory_;
  std::atomic<bool> cancelled_{false};
};

DOCKHAND_PLUGIN(CopyToDir, "copy-to-dir", "1.0.0", "Copies blocks into a directory")
