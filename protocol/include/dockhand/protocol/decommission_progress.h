// How far an agent's decommission has got: a Heartbeat's "decommission" object (and the
// agent's /v1/status "decommission"), docs/protocol.md. The agent writes it
// (DecommissionFlow::figures) and the driver reads it (its scheduler, status page, report and
// log): this is the one writing and the one reading of that object, and the one meaning of
// each number in it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace dockhand::protocol {

struct DecommissionProgress {
  std::string state{};  // waiting-for-tasks, migrating, finishing, finished, deadline-passed
  std::uint64_t running_tasks = 0;
  std::uint64_t blocks_migrated = 0;  // moved to a peer or the fallback store
  std::uint64_t blocks_failed = 0;    // moves that failed (such a block may move in a later pass)
  std::uint64_t blocks_left = 0;      // still on the agent, those that failed to move included
  std::uint64_t bytes_migrated = 0;
  std::uint64_t bytes_left = 0;
  std::uint64_t passes = 0;  // migration passes begun
  // Bytes moved per second since the first pass began, and how long the bytes left take at that
  // rate; unknown until some bytes moved.
  std::optional<std::uint64_t> bytes_per_s{};
  std::optional<std::uint64_t> eta_ms{};

  std::uint64_t blocksTotal() const { return blocks_migrated + blocks_left; }
  std::uint64_t bytesTotal() const { return bytes_migrated + bytes_left; }
};

// {"state", "running_tasks", "bytes_per_s", "eta_ms", "blocks_total", "blocks_migrated",
// "blocks_failed", "blocks_left", "bytes_total", "bytes_migrated", "bytes_left", "passes"}; the
// totals are migrated + left, an unknown rate or ETA is null; null when nullopt (not
// decommissioning).
nlohmann::json toJson(const std::optional<DecommissionProgress>& progress);
// Leniently, so that a bad figure never costs an agent its heartbeat: a number that is missing,
// negative or not an integer reads as 0 (the rate and the ETA as unknown), a state that is not
// a string as "". nullopt when `report` is not an object (null: not decommissioning).
std::optional<DecommissionProgress> readDecommissionProgress(const nlohmann::json& report);

}  // namespace dockhand::protocol
