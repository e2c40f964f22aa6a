// What work uses, as the protocol carries it: what one task cost (TaskMetrics, a terminal
// StatusUpdate's "metrics", docs/protocol.md 8.8), measured by the agent (run time, input and
// output blocks) and by the task's runner (CPU time, peak memory, result size, I/O, figures of
// its own); and what an agent holds (AgentMetrics, a Heartbeat's "metrics", 8.17). A figure
// nobody could tell is absent, never 0.
//
// One rule reads them wherever they come from (a runner's status detail on the agent, a
// message on the driver, an event log): each known figure is a non-negative integer, each
// figure of a runner's own ("custom") a non-negative number; anything else is dropped and
// named in `dropped`, never an error, so that a bad figure never costs a task its status or
// an agent its heartbeat.
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

// Every figure has a default ({}: absent), so a value built by field names keeps compiling
// (warnings as errors) when a figure is added.
struct TaskMetrics {
  // Agent: from the task's start on its cores to its end (Spark's executorRunTime).
  std::optional<std::uint64_t> run_time_ms{};
  // Runner: user + system CPU of the task (a process task's whole process tree, a library
  // task's thread) (Spark's executorCpuTime).
  std::optional<std::uint64_t> cpu_time_ms{};
  // Runner: the largest resident set of the task's processes (Spark's peakExecutionMemory
  // is the nearest); absent for a task that shares the agent's memory (a library task).
  std::optional<std::uint64_t> peak_rss_bytes{};
  // Runner: the size of the result it reported (Spark's resultSize).
  std::optional<std::uint64_t> result_bytes{};
  // Runner: bytes the task's processes passed to read and write calls (/proc/PID/io).
  std::optional<std::uint64_t> io_read_bytes{};
  std::optional<std::uint64_t> io_write_bytes{};
  // Agent: the input blocks fetched for it, their bytes and the time the fetches took
  // (Spark's shuffle read: remote blocks, remote bytes, fetch wait time).
  std::optional<std::uint64_t> input_blocks{};
  std::optional<std::uint64_t> input_bytes{};
  std::optional<std::uint64_t> input_fetch_ms{};
  // Agent: the blocks it wrote and their bytes (Spark's shuffle write).
  std::optional<std::uint64_t> output_blocks{};
  std::optional<std::uint64_t> output_bytes{};
  // Runner: figures of its own, by name (no unit implied).
  std::map<std::string, double> custom{};

  bool empty() const;
  // Every figure `other` has replaces this one's.
  void merge(const TaskMetrics& other);
  bool operator==(const TaskMetrics&) const = default;
};

// An agent's figures, sampled when it sends a heartbeat.
struct AgentMetrics {
  std::optional<std::uint64_t> rss_bytes{};       // the agent process, resident now
  std::optional<std::uint64_t> peak_rss_bytes{};  // the agent process, the most it ever was
  std::optional<std::uint64_t> cpu_time_ms{};     // the agent process, user + system, so far
  std::optional<std::uint64_t> threads{};         // the agent process's threads, now
  // Every live process the agent started (process tasks and theirs, library workers), summed
  // (Spark's ProcessTree*RSSMemory), now; and the most it was since the last heartbeat (the
  // larger of that and the peak of each task that ended meanwhile: a spike between two
  // heartbeats is not missed).
  std::optional<std::uint64_t> tasks_rss_bytes{};
  std::optional<std::uint64_t> peak_tasks_rss_bytes{};
  std::optional<std::uint64_t> blocks{};  // held in its block store
  std::optional<std::uint64_t> block_bytes{};

  bool empty() const;
  bool operator==(const AgentMetrics&) const = default;
};

// A known figure: its wire name and member, in documentation order.
template <class Figures>
struct MetricField {
  std::string_view name;
  std::optional<std::uint64_t> Figures::*member;
};
extern const std::array<MetricField<TaskMetrics>, 11> kTaskMetricFields;
extern const std::array<MetricField<AgentMetrics>, 8> kAgentMetricFields;

// {"run_time_ms": 12, ..., "custom": {"rows": 10}}; absent figures left out, and "custom" when
// empty.
nlohmann::json toJson(const TaskMetrics& metrics);
// The figures of a JSON object (anything else is no figure, and named in `dropped`): known
// names as non-negative integers, "custom" an object of non-negative numbers. Unknown names
// are skipped silently (a newer peer's figures). `dropped` (may be null) gets "name: why" for
// each figure left out.
TaskMetrics taskMetricsFromJson(const nlohmann::json& object, std::vector<std::string>* dropped);

// The same for an agent's figures (no "custom").
nlohmann::json toJson(const AgentMetrics& metrics);
AgentMetrics agentMetricsFromJson(const nlohmann::json& object, std::vector<std::string>* dropped);

}  // namespace dockhand::protocol
