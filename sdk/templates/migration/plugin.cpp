// The @NAME@ block migration plugin: copies each block it is offered into the directory its
// config names, {"directory": "/mnt/blocks"}, checks the copy's checksum (dockhand/checksum.hpp)
// and answers the block migrated to the shared fallback store ({"id"}); a block it could not
// copy is answered failed with the reason, and stays on the agent for the next plugin.
// cancel() (any thread) makes migrate() return after the block in hand. The directory is the
// cluster's fallback store: set the agents' `fallback_dir` to it too (a shared file system), so
// that they serve what lands there and `dockhand plugins check` reads the block back. Replace
// the copy with your store's upload; answer {"id", "url"} when readers are to GET it there.
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

// The string value of "key" in the JSON object text `json` (block fields come in any order).
std::string stringField(std::string_view json, std::string_view key) {
  const std::string needle = "\"" + std::string(key) + "\"";
  auto at = json.find(needle);
  if (at == std::string_view::npos) return {};
  at = json.find('"', json.find(':', at + needle.size()) + 1);
  return std::string(json.substr(at + 1, json.find('"', at + 1) - at - 1));
}

std::string jsonString(const std::string& text) {
  std::string out = "\"";
  for (const char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

std::string checksumOfFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  dockhand::sdk::Xxh64 sum;
  char buffer[1 << 16];
  while (in.read(buffer, sizeof buffer) || in.gcount() > 0) {
    sum.update(buffer, static_cast<std::size_t>(in.gcount()));
  }
  return in.bad() ? std::string() : sum.text();
}

}  // namespace

class DockhandTemplateClass : public dockhand::sdk::BlockMigration {
 public:
  static constexpr const char* kConfigSchema = R"({
    "type": "object",
    "properties": {"directory": {"type": "string", "pattern": "^/"}},
    "required": ["directory"],
    "additionalProperties": false
  })";

  DockhandTemplateClass(dockhand::sdk::Host host, std::string_view config_json)
      : host_(host), directory_(stringField(config_json, "directory")) {
    std::error_code ec;
    fs::create_directories(directory_, ec);
    if (ec) throw std::runtime_error("cannot create " + directory_.string() + ": " + ec.message());
  }

  // A migration thread; may block.
  std::string migrate(std::string_view request_json) override {
    cancelled_ = false;
    std::string migrated;
    std::string failed;
    for (auto at = request_json.find("\"id\""); at != std::string_view::npos && !cancelled_;
         at = request_json.find("\"id\"", at + 1)) {
      const auto open = request_json.rfind('{', at);
      const std::string_view block = request_json.substr(open, request_json.find('}', at) - open);
      const std::string id = stringField(block, "id");
      const fs::path partial = directory_ / (id + ".partial");
      std::error_code ec;
      fs::copy_file(stringField(block, "path"), partial, fs::copy_options::overwrite_existing, ec);
      std::string reason = ec ? ec.message() : "";
      if (reason.empty() && checksumOfFile(partial) != stringField(block, "checksum")) {
        reason = "the copy's checksum is not the block's";
      }
      if (reason.empty()) fs::rename(partial, directory_ / id, ec);
      if (reason.empty() && ec) reason = ec.message();
      if (!reason.empty()) {
        fs::remove(partial, ec);
        failed += (failed.empty() ? "" : ", ") + std::string(R"({"id": )") + jsonString(id) +
                  R"(, "reason": )" + jsonString(reason) + "}";
        continue;
      }
      migrated += (migrated.empty() ? "" : ", ") + std::string(R"({"id": )") + jsonString(id) + "}";
      host_.migrationProgress(R"({"block": )" + jsonString(id) + R"(, "done": true})");
    }
    return R"({"migrated": [)" + migrated + R"(], "failed": [)" + failed + "]}";
  }

  void cancel() override { cancelled_ = true; }

 private:
  dockhand::sdk::Host host_;
  fs::path directory_;
  std::atomic<bool> cancelled_{false};
};

DOCKHAND_PLUGIN(DockhandTemplateClass, "@NAME@", "0.1.0", "Copies blocks into a shared directory")
