// The `copy-to-dir` migration plugin: copies each block to {"directory": "/mnt/blocks"},
// first under a temporary name, then renamed, so a block is reported migrated only once a
// complete copy exists. Progress goes to the host after each block.
#include <atomic>
#include <filesystem>
#include <string>
#include <string_view>
#include <system_error>

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

std::string quoted(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
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

  // A migration thread; may block. request: {"blocks": [{"id": ..., "path": ...}], ...}
  std::string migrate(std::string_view request_json) override {
    std::string migrated;
    std::string failed;
    for (auto at = request_json.find("\"id\""); at != std::string_view::npos && !cancelled_;
         at = request_json.find("\"id\"", at + 1)) {
      const std::string id = stringField(request_json, "id", at);
      const std::string path = stringField(request_json, "path", at);
      const fs::path target = directory_ / id;
      const fs::path partial = directory_ / (id + ".partial");
      std::error_code ec;
      fs::copy_file(path, partial, fs::copy_options::overwrite_existing, ec);
      if (!ec) fs::rename(partial, target, ec);
      if (ec) {
        failed += (failed.empty() ? "" : ", ") + std::string("{\"id\": ") + quoted(id) +
                  ", \"reason\": " + quoted(ec.message()) + "}";
        continue;
      }
      migrated += (migrated.empty() ? "" : ", ") + std::string("{\"id\": ") + quoted(id) +
                  ", \"location\": " + quoted(target.string()) + "}";
      host_.migrationProgress("{\"block\": " + quoted(id) + R"(, "done": true, "location": )" +
                              quoted(target.string()) + "}");
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
