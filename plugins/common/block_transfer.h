// Shared by the built-in block-migration plugins (peer, fallback), header-only so that each
// plugin library stays self-contained: the migrate request's blocks, the skeleton both
// plugins are built on (ConcurrentBlockMigration: migrate() and cancel(), the blocks spread
// over transfer threads, progress, the answer), xxh64 checksums, a bandwidth limit shared by
// a plugin's transfer threads, and durable file writes.
#ifndef DOCKHAND_PLUGINS_BLOCK_TRANSFER_H
#define DOCKHAND_PLUGINS_BLOCK_TRANSFER_H

#include <fcntl.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "dockhand/plugin.hpp"

namespace dockhand::plugins {

struct BlockToMove {
  std::string id;
  std::string path;
  std::uint64_t size = 0;
  std::string checksum;
};

struct PeerTarget {
  std::string executor_id;
  std::string block_url;
};

// Runs body(i) for every i in [0, count) on up to `max_concurrent` threads (at least one),
// each thread taking the next index until none is left; returns when all are done.
template <typename Body>
void forEachConcurrently(std::size_t count, int max_concurrent, Body body) {
  std::atomic<std::size_t> next{0};
  auto worker = [&] {
    for (std::size_t i = next++; i < count; i = next++) body(i);
  };
  std::size_t threads =
      std::min<std::size_t>(static_cast<std::size_t>(std::max(1, max_concurrent)), count);
  std::vector<std::thread> pool;
  for (std::size_t t = 0; t < threads; ++t) pool.emplace_back(worker);
  for (auto& t : pool) t.join();
}

// Reads {"blocks": [...], "peers": [...]}; throws sdk::Error(DH_INVALID_ARGUMENT).
inline void parseMigrateRequest(std::string_view text, std::vector<BlockToMove>& blocks,
                                std::vector<PeerTarget>& peers) {
  nlohmann::json request = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!request.is_object() || !request.contains("blocks") || !request["blocks"].is_array()) {
    throw sdk::Error(DH_INVALID_ARGUMENT, "migrate request: expected {\"blocks\": [...]}");
  }
  for (const auto& b : request["blocks"]) {
    if (!b.is_object() || !b.contains("id") || !b.contains("path")) {
      throw sdk::Error(DH_INVALID_ARGUMENT, "migrate request: a block needs an id and a path");
    }
    blocks.push_back(BlockToMove{b.value("id", ""), b.value("path", ""),
                                 b.value("size", std::uint64_t{0}), b.value("checksum", "")});
  }
  if (request.contains("peers") && request["peers"].is_array()) {
    for (const auto& p : request["peers"]) {
      if (!p.is_object()) continue;
      peers.push_back(PeerTarget{p.value("executor_id", ""), p.value("block_url", "")});
    }
  }
}

// Where a block went: the location its readers use, and the executor that holds it ("" when
// none does, as for a shared directory).
struct BlockMoved {
  std::string location;
  std::string executor_id;
};

// What moving one block came to: where it went, or (moved empty) why it did not.
struct MoveOutcome {
  std::optional<BlockMoved> moved;
  std::string why;
};

// migrate()'s answer when every block failed for the same reason.
inline std::string failEveryBlock(const std::vector<BlockToMove>& blocks, const std::string& why) {
  nlohmann::json failed = nlohmann::json::array();
  for (const auto& b : blocks) failed.push_back({{"id", b.id}, {"reason", why}});
  return nlohmann::json{{"migrated", nlohmann::json::array()}, {"failed", failed}}.dump();
}

// The skeleton of a migration plugin's migrate(): moves every block with move(block, index)
// (returning a MoveOutcome) on up to `max_concurrent` threads, tells the host of each block
// that arrived (migration_progress), and returns the answer
// {"migrated": [{"id", "location", "executor_id"}], "failed": [{"id", "reason"}]}, each list in
// the order the blocks finished. `move` runs on those threads, several at once.
template <typename Move>
std::string moveBlocks(const sdk::Host& host, const std::vector<BlockToMove>& blocks,
                       int max_concurrent, Move move) {
  nlohmann::json migrated = nlohmann::json::array();
  nlohmann::json failed = nlohmann::json::array();
  std::mutex results_mutex;
  forEachConcurrently(blocks.size(), max_concurrent, [&](std::size_t i) {
    const BlockToMove& block = blocks[i];
    MoveOutcome outcome = move(block, i);
    std::lock_guard lock(results_mutex);
    if (outcome.moved) {
      migrated.push_back({{"id", block.id},
                          {"location", outcome.moved->location},
                          {"executor_id", outcome.moved->executor_id}});
      host.migrationProgress(nlohmann::json{{"block", block.id},
                                            {"bytes", block.size},
                                            {"done", true},
                                            {"location", outcome.moved->location}}
                                 .dump());
    } else {
      failed.push_back({{"id", block.id}, {"reason", outcome.why}});
    }
  });
  return nlohmann::json{{"migrated", migrated}, {"failed", failed}}.dump();
}

inline std::string formatXxh64(std::uint64_t value) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out = "xxh64:";
  for (int shift = 60; shift >= 0; shift -= 4) out.push_back(kHex[(value >> shift) & 0xf]);
  return out;
}

class Hasher {
 public:
  Hasher() : state_(XXH64_createState()) { XXH64_reset(state_, 0); }
  ~Hasher() { XXH64_freeState(state_); }
  Hasher(const Hasher&) = delete;
  Hasher& operator=(const Hasher&) = delete;
  void update(const void* data, std::size_t size) { XXH64_update(state_, data, size); }
  std::string text() const { return formatXxh64(XXH64_digest(state_)); }

 private:
  XXH64_state_t* state_;
};

// A bandwidth limit shared by several threads: each reserves a slot for its next piece and
// waits for it. 0 bytes per second: no limit.
class RateLimiter {
 public:
  explicit RateLimiter(std::uint64_t bytes_per_second) : rate_(bytes_per_second) {}
  bool limited() const { return rate_ > 0; }
  void acquire(std::uint64_t bytes) {
    if (rate_ == 0) return;
    using Clock = std::chrono::steady_clock;
    Clock::time_point start;
    {
      std::lock_guard lock(mutex_);
      Clock::time_point now = Clock::now();
      start = std::max(next_, now);
      next_ = start + std::chrono::nanoseconds(bytes * 1000000000ULL / rate_);
    }
    std::this_thread::sleep_until(start);
  }

 private:
  std::uint64_t rate_;
  std::mutex mutex_;
  std::chrono::steady_clock::time_point next_{};
};

// The skeleton of the built-in migration plugins. migrate() starts a pass (cancel() of an
// earlier one no longer counts), reads the request and hands its blocks and peers to
// moveAll(), which a plugin implements, usually with moveBlocks(). cancel() may come from
// any thread while a pass runs: moveAll checks cancelled_ between blocks and between pieces.
// The bandwidth limit is shared by every transfer thread of the instance.
class ConcurrentBlockMigration : public sdk::BlockMigration {
 public:
  void cancel() override { cancelled_ = true; }

  std::string migrate(std::string_view request_json) final {
    cancelled_ = false;
    std::vector<BlockToMove> blocks;
    std::vector<PeerTarget> peers;
    parseMigrateRequest(request_json, blocks, peers);
    return moveAll(blocks, peers);
  }

 protected:
  ConcurrentBlockMigration(sdk::Host host, std::uint64_t bandwidth_bytes_per_s)
      : host_(host), limiter_(bandwidth_bytes_per_s) {}

  // Moves the request's blocks; returns migrate()'s answer.
  virtual std::string moveAll(const std::vector<BlockToMove>& blocks,
                              const std::vector<PeerTarget>& peers) = 0;

  sdk::Host host_;
  RateLimiter limiter_;
  std::atomic<bool> cancelled_{false};
};

inline std::string errnoText(const std::string& what) { return what + ": " + std::strerror(errno); }

// fsyncs a directory, so that a rename in it is durable.
inline bool syncDirectory(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return false;
  bool ok = ::fsync(fd) == 0;
  ::close(fd);
  return ok;
}

// The xxh64 of a whole file, or "" when it cannot be read.
inline std::string checksumOfFile(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {};
  Hasher hash;
  std::vector<char> buffer(1 << 20);
  for (;;) {
    ssize_t n = ::read(fd, buffer.data(), buffer.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      ::close(fd);
      return {};
    }
    if (n == 0) break;
    hash.update(buffer.data(), static_cast<std::size_t>(n));
  }
  ::close(fd);
  return hash.text();
}

}  // namespace dockhand::plugins

#endif  // DOCKHAND_PLUGINS_BLOCK_TRANSFER_H
