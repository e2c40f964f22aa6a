// The `fallback` block-migration plugin: copies blocks into a directory every agent can reach
// (a shared mount), for the blocks no peer could take. Each copy goes to a temporary name in
// that directory, is fsynced, read back and checked against the block's checksum, and only
// then renamed to <dir>/<id> (and the directory fsynced): a reader never finds half a block
// there. Location reported: "fallback:<id>", with no executor.
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>

#include <atomic>
#include <filesystem>
#include <set>

#include "block_transfer.h"

namespace dockhand::plugins {
namespace {

using nlohmann::json;

struct FallbackConfig {
  std::string dir;
  int max_concurrent = 4;
  std::uint64_t bandwidth_bytes_per_s = 0;
};

FallbackConfig parseConfig(std::string_view text) {
  json j = json::parse(text.empty() ? std::string_view("{}") : text, nullptr, false);
  if (!j.is_object()) throw sdk::Error(DH_INVALID_ARGUMENT, "fallback: config must be an object");
  static const std::set<std::string> kKeys = {"dir", "max_concurrent", "bandwidth_bytes_per_s"};
  for (const auto& [key, value] : j.items()) {
    if (kKeys.count(key) == 0) {
      throw sdk::Error(DH_INVALID_ARGUMENT, "fallback: config: unknown key '" + key + "'");
    }
  }
  FallbackConfig c;
  if (!j.contains("dir") || !j["dir"].is_string() || j["dir"].get<std::string>().empty()) {
    throw sdk::Error(DH_INVALID_ARGUMENT, "fallback: config: /dir: a directory is required");
  }
  c.dir = j["dir"].get<std::string>();
  c.max_concurrent = std::max(1, j.value("max_concurrent", c.max_concurrent));
  c.bandwidth_bytes_per_s = j.value("bandwidth_bytes_per_s", c.bandwidth_bytes_per_s);
  std::error_code ec;
  std::filesystem::create_directories(c.dir, ec);
  if (ec) {
    throw sdk::Error(DH_ERROR, "fallback: cannot create " + c.dir + ": " + ec.message());
  }
  return c;
}

class FallbackMigration : public ConcurrentBlockMigration {
 public:
  // What parseConfig accepts (the agent passes dir, max_concurrent and bandwidth_bytes_per_s
  // from its decommission section), checked by the host before create().
  static constexpr const char* kConfigSchema = R"({
    "type": "object",
    "properties": {
      "dir": {"type": "string", "minLength": 1},
      "max_concurrent": {"type": "integer"},
      "bandwidth_bytes_per_s": {"type": "integer", "minimum": 0}
    },
    "required": ["dir"],
    "additionalProperties": false
  })";

  FallbackMigration(sdk::Host host, std::string_view config_json)
      : FallbackMigration(host, parseConfig(config_json)) {}

 private:
  FallbackMigration(sdk::Host host, FallbackConfig config)
      : ConcurrentBlockMigration(host, config.bandwidth_bytes_per_s), config_(std::move(config)) {}

  std::string moveAll(const std::vector<BlockToMove>& blocks,
                      const std::vector<PeerTarget>& /*peers*/) override {
    return moveBlocks(host_, blocks, config_.max_concurrent,
                      [&](const BlockToMove& block, std::size_t /*index*/) -> MoveOutcome {
                        std::string why = cancelled_ ? std::string("cancelled") : copyBlock(block);
                        if (why.empty()) return {BlockMoved{"fallback:" + block.id, ""}, {}};
                        host_.warn("block " + block.id + " to " + config_.dir + ": " + why);
                        return {std::nullopt, why};
                      });
  }

  // Copies one block; returns "" on success, else why not.
  std::string copyBlock(const BlockToMove& block) {
    if (block.id.empty() || block.id.find('/') != std::string::npos || block.id[0] == '.') {
      return "invalid block id '" + block.id + "'";
    }
    const std::string target = config_.dir + "/" + block.id;
    struct stat st {};
    if (::stat(target.c_str(), &st) == 0) {
      // Already there (an earlier pass, another agent): fine when it is the same block.
      if (!block.checksum.empty() && checksumOfFile(target) == block.checksum) return {};
      return "a different " + block.id + " is already in " + config_.dir;
    }
    const std::string temp = config_.dir + "/.incoming-" + block.id + "-" +
                             std::to_string(::getpid()) + "-" +
                             std::to_string(counter_.fetch_add(1));
    int in = ::open(block.path.c_str(), O_RDONLY | O_CLOEXEC);
    if (in < 0) return errnoText("cannot open " + block.path);
    int out = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (out < 0) {
      std::string why = errnoText("cannot create " + temp);
      ::close(in);
      return why;
    }
    auto fail = [&](const std::string& why) {
      ::close(in);
      if (out >= 0) ::close(out);
      ::unlink(temp.c_str());
      return why;
    };
    Hasher source_hash;
    std::vector<char> buffer(1 << 20);
    for (;;) {
      if (cancelled_) return fail("cancelled");
      ssize_t n = ::read(in, buffer.data(), buffer.size());
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return fail(errnoText("cannot read " + block.path));
      if (n == 0) break;
      limiter_.acquire(static_cast<std::uint64_t>(n));
      source_hash.update(buffer.data(), static_cast<std::size_t>(n));
      const char* p = buffer.data();
      auto left = static_cast<std::size_t>(n);
      while (left > 0) {
        ssize_t w = ::write(out, p, left);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) return fail(errnoText("cannot write " + temp));
        p += w;
        left -= static_cast<std::size_t>(w);
      }
    }
    if (::fsync(out) != 0) return fail(errnoText("cannot fsync " + temp));
    ::close(out);
    out = -1;
    if (!block.checksum.empty() && source_hash.text() != block.checksum) {
      return fail("the local copy does not match its checksum " + block.checksum);
    }
    // Verify at the destination: what the directory holds is what we meant to write.
    std::string written = checksumOfFile(temp);
    if (written != source_hash.text()) {
      return fail("the copy in " + config_.dir + " does not match (" + written + ")");
    }
    if (::rename(temp.c_str(), target.c_str()) != 0) {
      return fail(errnoText("cannot rename into " + target));
    }
    ::close(in);
    if (!syncDirectory(config_.dir)) return errnoText("cannot fsync " + config_.dir);
    return {};
  }

  FallbackConfig config_;
  std::atomic<std::uint64_t> counter_{0};
};

}  // namespace
}  // namespace dockhand::plugins

DOCKHAND_PLUGIN(dockhand::plugins::FallbackMigration, "fallback", "0.1.0",
                "Copies blocks to a shared directory (the fallback store)")
