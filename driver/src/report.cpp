#include "dockhand/driver/report.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <iterator>

#include <fmt/format.h>

namespace dockhand::driver {

namespace {

std::string trim(std::string_view s) {
  const auto first = s.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) return {};
  const auto last = s.find_last_not_of(" \t\r\n");
  return std::string(s.substr(first, last - first + 1));
}

std::string stringField(const Json& result, const char* key) {
  auto it = result.find(key);
  if (it == result.end() || !it->is_string()) return {};
  return it->get<std::string>();
}

// A process task's stdout, or a library task's value (its base64 form marked as such), or
// another runner's result as text.
std::string rawText(const Json& result) {
  if (auto other = otherResultText(result)) return *other;
  if (!result.is_object()) return {};
  if (result.contains("stdout")) return stringField(result, "stdout");
  if (result.contains("value")) return stringField(result, "value");
  if (result.contains("value_base64"))
    return std::string(kBase64Mark) + stringField(result, "value_base64");
  return {};
}

bool writesBlocks(const JobSpec& job) {
  return std::any_of(job.tasks.begin(), job.tasks.end(),
                     [](const TaskSpec& t) { return !t.outputs.empty(); });
}

std::string formatDuration(std::chrono::milliseconds d) {
  if (d.count() < 10000) return fmt::format("{}ms", d.count());
  return fmt::format("{:.1f}s", static_cast<double>(d.count()) / 1000.0);
}

}  // namespace

std::optional<std::string> otherResultText(const Json& result) {
  if (result.is_null()) return std::nullopt;
  if (result.is_string()) return result.get<std::string>();
  if (result.is_object()) {
    for (const char* key : {"stdout", "value", "value_base64", "block"}) {
      if (result.contains(key)) return std::nullopt;
    }
  }
  return result.dump(-1, ' ', false, Json::error_handler_t::replace);
}

std::string formatNumber(double value) {
  if (std::isfinite(value) && value == std::floor(value) && std::fabs(value) < 9.0e15) {
    return fmt::format("{}", static_cast<long long>(value));
  }
  return fmt::format("{}", value);
}

std::string resultText(const Json& result, std::size_t max_chars) {
  std::string text = trim(rawText(result));
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    if (c == '\r') continue;
    if (c == '\n') {
      out += " | ";
    } else if (static_cast<unsigned char>(c) < 0x20 && c != '\t') {
      out += '?';
    } else {
      out += c;
    }
  }
  if (out.size() > max_chars) {
    out.resize(max_chars);
    out += "...";
  }
  return out;
}

SumResult sumResults(const std::vector<TaskRecord>& tasks) {
  SumResult sum;
  for (const auto& t : tasks) {
    if (t.outcome != TaskOutcome::kFinished || !t.spec.outputs.empty()) continue;
    std::string text = trim(rawText(t.result));
    char* end = nullptr;
    errno = 0;
    double value = text.empty() ? 0 : std::strtod(text.c_str(), &end);
    if (text.empty() || errno != 0 || end != text.c_str() + text.size() || !std::isfinite(value)) {
      sum.not_numeric.push_back(t.spec.name);
      continue;
    }
    sum.sum += value;
    ++sum.numeric;
  }
  return sum;
}

std::string formatTaskLine(const TaskRecord& task, std::size_t name_width) {
  std::string line =
      fmt::format("{:<{}}  {:<9}  {:<10}  attempts={}  {:>7}", task.spec.name, name_width,
                  toString(task.outcome), task.agent_id.empty() ? "-" : task.agent_id,
                  task.launches, task.launches > 0 ? formatDuration(task.duration) : "-");
  if (task.outcome == TaskOutcome::kFinished) {
    std::string out = resultText(task.result);
    if (!out.empty()) line += "  " + out;
  } else if (task.outcome == TaskOutcome::kFailed || task.outcome == TaskOutcome::kKilled) {
    std::string why = task.reason;
    if (task.exit_code)
      why += fmt::format("{}exit code {}", why.empty() ? "" : ", ", *task.exit_code);
    if (task.signal) why += fmt::format("{}signal {}", why.empty() ? "" : ", ", *task.signal);
    if (!why.empty()) line += "  " + why;
    std::string err = resultText(Json{{"stdout", task.stderr_tail}}, 160);
    if (!err.empty()) line += "  stderr: " + err;
    if (auto it = task.log_urls.find("stdout"); it != task.log_urls.end()) {
      line += "  stdout log: " + it->second;
    }
  }
  return line;
}

std::string formatSummary(const JobSpec& job, JobState state, const Progress& p,
                          const std::string& failure_reason, std::chrono::milliseconds wall,
                          const std::optional<SumResult>& sum) {
  std::string line = fmt::format(
      "job {} {}: {} tasks, {} finished, {} failed, {} not run; {} retries, {} relaunched after "
      "agent loss{}; wall {:.2f}s",
      job.name, toString(state), p.total, p.finished, p.failed, p.total - p.finished - p.failed,
      p.retries, p.relaunches_after_loss,
      writesBlocks(job) ? fmt::format(", {} map tasks rerun for lost blocks, {} failed fetches",
                                      p.reruns_for_lost_blocks, p.fetch_failures)
                        : std::string(),
      static_cast<double>(wall.count()) / 1000.0);
  if (sum) {
    line += fmt::format("; sum={}", formatNumber(sum->sum));
    if (!sum->not_numeric.empty()) {
      line += fmt::format(" ({} task(s) without a numeric result, e.g. '{}')",
                          sum->not_numeric.size(), sum->not_numeric.front());
    }
  }
  if (state == JobState::kFailed && !failure_reason.empty())
    line += "\n  reason: " + failure_reason;
  return line;
}

std::string formatProgress(const std::string& job_name, const Progress& p) {
  std::string line = fmt::format("[{}] {}/{} done, {} running, {} failed, {} retried", job_name,
                                 p.finished, p.total, p.running, p.failed, p.retries);
  if (p.waiting_for_inputs > 0)
    line += fmt::format(", {} waiting for blocks", p.waiting_for_inputs);
  if (p.reruns_for_lost_blocks > 0) {
    line += fmt::format(", {} rerun for lost blocks", p.reruns_for_lost_blocks);
  }
  for (const auto& d : p.decommissions) {
    const std::uint64_t done = d.blocks_migrated + d.blocks_failed;
    line +=
        fmt::format(" | {} decommissioning{}: {}/{} blocks moved, {} left, {} failed, {}/{} moved",
                    d.agent_id, d.state.empty() ? "" : " (" + d.state + ")", d.blocks_migrated,
                    d.blocks_total, d.blocks_total - std::min(d.blocks_total, done),
                    d.blocks_failed, formatBytes(d.bytes_migrated), formatBytes(d.bytes_total));
  }
  return line;
}

std::string formatBytes(std::uint64_t bytes) {
  if (bytes < 1024) return fmt::format("{} B", bytes);
  const char* units[] = {"KiB", "MiB", "GiB", "TiB"};
  auto value = static_cast<double>(bytes) / 1024.0;
  std::size_t unit = 0;
  while (value >= 1024.0 && unit + 1 < std::size(units)) {
    value /= 1024.0;
    ++unit;
  }
  return fmt::format("{:.1f} {}", value, units[unit]);
}

}  // namespace dockhand::driver
