// The two-stage job of examples/decommission as the integration tests run it: kShuffleMaps maps
// (map.sh over the word count's four input files) each write kShuffleReducers shuffle blocks,
// and each reduce (reduce.sh) reads one block of every map. Each map first leaves the marker
// file <dir>/started-<m>, so that a test knows the maps run, then sleeps `map_seconds`.
// Header-only: DOCKHAND_SOURCE_DIR is the test program's.
#pragma once

#include <filesystem>
#include <string>

#include "support/process.h"

namespace dockhand::testing {

inline constexpr int kShuffleMaps = 4;
inline constexpr int kShuffleReducers = 2;

inline std::string shuffleBlockId(int map, int reduce) {
  return "shuffle_0_" + std::to_string(map) + "_" + std::to_string(reduce);
}

// Whether every map of the job written under `dir` has started (left its marker).
inline bool shuffleMapsStarted(const std::filesystem::path& dir) {
  for (int m = 0; m < kShuffleMaps; ++m) {
    if (!std::filesystem::exists(dir / ("started-" + std::to_string(m)))) return false;
  }
  return true;
}

// Writes the job to <dir>/job.json ("name": "shuffle", max_attempts 2, sum of the results).
inline std::filesystem::path writeShuffleJob(const std::filesystem::path& dir,
                                             const std::string& map_seconds) {
  const std::filesystem::path example =
      std::filesystem::path(DOCKHAND_SOURCE_DIR) / "examples" / "decommission";
  const std::filesystem::path data =
      std::filesystem::path(DOCKHAND_SOURCE_DIR) / "examples" / "wordcount" / "data";
  std::string tasks;
  for (int m = 0; m < kShuffleMaps; ++m) {
    std::string outputs;
    for (int r = 0; r < kShuffleReducers; ++r) {
      outputs += (r ? ", \"" : "\"") + shuffleBlockId(m, r) + "\"";
    }
    tasks += R"({"name": "map-)" + std::to_string(m) + R"(", "shell": "touch ')" +
             (dir / ("started-" + std::to_string(m))).string() + "' && sh '" +
             (example / "map.sh").string() + "' '" +
             (data / ("part-" + std::to_string(m + 1) + ".txt")).string() + "' " +
             std::to_string(m) + " " + std::to_string(kShuffleReducers) +
             R"(", "env": {"MAP_SECONDS": ")";
    tasks += map_seconds;
    tasks += R"("}, "outputs": [)";
    tasks += outputs;
    tasks += "]},\n";
  }
  for (int r = 0; r < kShuffleReducers; ++r) {
    std::string inputs;
    for (int m = 0; m < kShuffleMaps; ++m) {
      inputs += (m ? ", \"" : "\"") + shuffleBlockId(m, r) + "\"";
    }
    tasks += R"({"name": "reduce-)" + std::to_string(r) + R"(", "shell": "sh ')" +
             (example / "reduce.sh").string() + "' " + std::to_string(r) + " " +
             std::to_string(kShuffleMaps) + R"(", "inputs": [)" + inputs + "]}" +
             (r + 1 < kShuffleReducers ? ",\n" : "\n");
  }
  std::filesystem::path job = dir / "job.json";
  writeFile(job,
            "{\"name\": \"shuffle\", \"max_attempts\": 2, \"aggregate\": \"sum\",\n"
            "\"tasks\": [\n" +
                tasks + "]}\n");
  return job;
}

}  // namespace dockhand::testing
