// What one task cost (docs/protocol.md 8.8, "metrics"): the figures a terminal StatusUpdate
// carries, measured by the agent (run time, input and output blocks) and by the task's runner
// (CPU time, peak memory, result size, I/O, and figures of its own). A figure nobody could
// tell is absent, never 0.
//
// One rule reads them wherever they come from (a runner's status detail on the agent, a
// StatusUpdate on the driver, an event log): each known figure is a non-negative integer, each
// figure of the runner's own ("custom") a non-negative number; anything else is dropped and
// named in `dropped`, never an error, so that a runner's or a peer's bad figure never costs a
// task its status.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace dockhand::protocol {

struct TaskMetrics {
  // Agent: from the task's start on its cores to its end (Spark's executorRunTime).
  std::optional<std::uint64_t> run_time_ms;
  // Runner: user + system CPU of the task (a process task's whole process tree, a library
  // task's thread) (Spark's executorCpuTime).
  std::optional<std::uint64_t> cpu_time_ms;
  // Runner: the largest resident set of the task's processes (Spark's peakExecutionMemory
  // is the nearest); absent for a task that shares the agent's memory (a library task).
  std::optional<std::uint64_t> peak_rss_bytes;
  // Runner: the size of the result it reported (Spark's resultSize).
  std::optional<std::uint64_t> result_bytes;
  // Runner: bytes the task's processes passed to read and write calls (/proc/PID/io).
  std::optional<std::uint64_t> io_read_bytes;
  std::optional<std::uint64_t> io_write_bytes;
  // Agent: the input blocks fetched for it, their bytes and the time the fetches took
  // (Spark's shuffle read: remote blocks, remote bytes, fetch wait time).
  std::optional<std::uint64_t> input_blocks;
  std::optional<std::uint64_t> input_bytes;
  std::optional<std::uint64_t> input_fetch_ms;
  // Agent: the blocks it wrote and their bytes (Spark's shuffle write).
  std::optional<std::uint64_t> output_blocks;
  std::optional<std::uint64_t> output_bytes;
  // Runner: figures of its own, by name (no unit implied).
  std::map<std::string, double> custom;

  bool empty() const;
  // Every figure `other` has replaces this one's.
  void merge(const TaskMetrics& other);
  bool operator==(const TaskMetrics&) const = default;
};

// The known figures, by wire name, in documentation order.
struct TaskMetricField {
  std::string_view name;
  std::optional<std::uint64_t> TaskMetrics::*member;
};
extern const std::array<TaskMetricField, 11> kTaskMetricFields;

// {"run_time_ms": 12, ..., "custom": {"rows": 10}}; absent figures left out, and "custom" when
// empty.
nlohmann::json toJson(const TaskMetrics& metrics);
// The figures of a JSON object (anything else is no figure, and named in `dropped`): known
// names as non-negative integers, "custom" an object of non-negative numbers. Unknown names
// are skipped silently (a newer peer's figures). `dropped` (may be null) gets "name: why" for
// each figure left out.
TaskMetrics taskMetricsFromJson(const nlohmann::json& object, std::vector<std::string>* dropped);

}  // namespace dockhand::protocol
