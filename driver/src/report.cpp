#include "dockhand/driver/report.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <iterator>

#include <fmt/format.h>
#include <fmt/ranges.h>

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

bool writesBlocks(const std::vector<TaskRecord>& tasks) {
  return std::any_of(tasks.begin(), tasks.end(),
                     [](const TaskRecord& t) { return !t.spec.outputs.empty(); });
}

}  // namespace

std::string formatDuration(std::chrono::milliseconds d) {
  if (d.count() < 10000) return fmt::format("{}ms", d.count());
  return fmt::format("{:.1f}s", static_cast<double>(d.count()) / 1000.0);
}

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
  if (const auto& cpu = task.metrics.cpu_time_ms) {
    line += fmt::format("  cpu={:<7}", formatDuration(std::chrono::milliseconds(*cpu)));
  }
  if (const auto& rss = task.metrics.peak_rss_bytes) {
    line += fmt::format("  rss={:<10}", formatBytes(*rss));
  }
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
  line.erase(line.find_last_not_of(' ') + 1);  // the padding of a last column
  return line;
}

std::string formatSummary(const JobSpec& job, const std::vector<TaskRecord>& tasks, JobState state,
                          const Progress& p, const std::string& failure_reason,
                          std::chrono::milliseconds wall, const std::optional<SumResult>& sum) {
  std::string line = fmt::format(
      "job {} {}: {} tasks, {} finished, {} failed, {} not run; {} retries, {} relaunched after "
      "agent loss{}; wall {:.2f}s",
      job.name, toString(state), p.total, p.finished, p.failed, p.total - p.finished - p.failed,
      p.retries, p.relaunches_after_loss,
      writesBlocks(tasks) ? fmt::format(", {} map tasks rerun for lost blocks, {} failed fetches",
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

std::string formatCost(const std::vector<TaskRecord>& tasks) {
  std::uint64_t cpu_ms = 0;
  std::uint64_t run_ms = 0;
  std::size_t measured = 0;
  const TaskRecord* biggest = nullptr;
  std::uint64_t in_blocks = 0;
  std::uint64_t in_bytes = 0;
  std::uint64_t fetch_ms = 0;
  std::uint64_t out_blocks = 0;
  std::uint64_t out_bytes = 0;
  std::vector<const TaskRecord*> ran;
  for (const auto& t : tasks) {
    const auto& m = t.metrics;
    if (m.cpu_time_ms) {
      cpu_ms += *m.cpu_time_ms;
      run_ms += m.run_time_ms.value_or(0);
      ++measured;
    }
    if (m.peak_rss_bytes && (!biggest || *m.peak_rss_bytes > *biggest->metrics.peak_rss_bytes)) {
      biggest = &t;
    }
    in_blocks += m.input_blocks.value_or(0);
    in_bytes += m.input_bytes.value_or(0);
    fetch_ms += m.input_fetch_ms.value_or(0);
    out_blocks += m.output_blocks.value_or(0);
    out_bytes += m.output_bytes.value_or(0);
    if (t.launches > 0 && t.outcome != TaskOutcome::kPending &&
        t.outcome != TaskOutcome::kRunning) {
      ran.push_back(&t);
    }
  }
  std::vector<std::string> parts;
  if (measured > 0) {
    parts.push_back(fmt::format("cpu {} in {} of task time over {} task(s)",
                                formatDuration(std::chrono::milliseconds(cpu_ms)),
                                formatDuration(std::chrono::milliseconds(run_ms)), measured));
  }
  if (biggest) {
    parts.push_back(fmt::format("peak memory {} ({} on {})",
                                formatBytes(*biggest->metrics.peak_rss_bytes), biggest->spec.name,
                                biggest->agent_id));
  }
  if (in_blocks > 0) {
    parts.push_back(fmt::format("inputs {} block(s), {} fetched in {}", in_blocks,
                                formatBytes(in_bytes),
                                formatDuration(std::chrono::milliseconds(fetch_ms))));
  }
  if (out_blocks > 0) {
    parts.push_back(fmt::format("outputs {} block(s), {}", out_blocks, formatBytes(out_bytes)));
  }
  if (parts.empty()) return {};
  std::string text = fmt::format("cost: {}\n", fmt::join(parts, "; "));
  constexpr std::size_t kSlowest = 3;
  const std::size_t shown = std::min(kSlowest, ran.size());
  std::partial_sort(
      ran.begin(), ran.begin() + static_cast<std::ptrdiff_t>(shown), ran.end(),
      [](const TaskRecord* a, const TaskRecord* b) { return a->duration > b->duration; });
  std::vector<std::string> slowest;
  for (std::size_t i = 0; i < shown; ++i) {
    slowest.push_back(fmt::format("{} on {} {}", ran[i]->spec.name, ran[i]->agent_id,
                                  formatDuration(ran[i]->duration)));
  }
  if (!slowest.empty()) text += fmt::format("slowest: {}\n", fmt::join(slowest, ", "));
  return text;
}

std::string formatAgentPeaks(const std::map<std::string, protocol::AgentMetrics>& peaks) {
  std::vector<std::pair<std::uint64_t, const std::string*>> order;
  order.reserve(peaks.size());
  for (const auto& [id, p] : peaks) order.emplace_back(p.tasks_rss_bytes.value_or(0), &id);
  std::stable_sort(order.begin(), order.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  constexpr std::size_t kShown = 3;
  std::vector<std::string> agents;
  for (std::size_t i = 0; i < order.size() && i < kShown; ++i) {
    const protocol::AgentMetrics& p = peaks.at(*order[i].second);
    std::vector<std::string> parts;
    if (p.tasks_rss_bytes.value_or(0) > 0) {
      parts.push_back(formatBytes(*p.tasks_rss_bytes) + " in tasks");
    }
    if (p.rss_bytes) parts.push_back(formatBytes(*p.rss_bytes) + " itself");
    if (p.blocks.value_or(0) > 0) {
      parts.push_back(fmt::format("{} blocks{}", *p.blocks,
                                  p.block_bytes ? " (" + formatBytes(*p.block_bytes) + ")" : ""));
    }
    if (!parts.empty())
      agents.push_back(*order[i].second + " " + fmt::format("{}", fmt::join(parts, ", ")));
  }
  if (agents.empty()) return "";
  std::string line = fmt::format("agent peaks: {}", fmt::join(agents, "; "));
  if (order.size() > kShown) line += fmt::format("; and {} more", order.size() - kShown);
  return line + "\n";
}

Json agentPeaksJson(const std::map<std::string, protocol::AgentMetrics>& peaks) {
  Json out = Json::object();
  for (const auto& [agent, figures] : peaks) out[agent] = protocol::toJson(figures);
  return out;
}

std::string formatReport(const JobReportView& report, bool quiet) {
  std::string out;
  if (!quiet) {
    std::size_t width = 4;
    for (const auto& t : report.tasks) width = std::max(width, t.spec.name.size());
    for (const auto& t : report.tasks) out += formatTaskLine(t, width) + "\n";
    out += formatCost(report.tasks);
    out += formatAgentPeaks(report.agent_peaks);
  }
  std::optional<SumResult> sum;
  if (report.job.aggregate == Aggregate::kSum) sum = sumResults(report.tasks);
  out += formatSummary(report.job, report.tasks, report.state, report.progress,
                       report.failure_reason, report.wall, sum) +
         "\n";
  return out;
}

std::string formatProgress(const std::string& job_name, const Progress& p) {
  std::string line = fmt::format("[{}] {}/{} done, {} running, {} failed, {} retried", job_name,
                                 p.finished, p.total, p.running, p.failed, p.retries);
  if (p.waiting_for_inputs > 0)
    line += fmt::format(", {} waiting for blocks", p.waiting_for_inputs);
  if (p.reruns_for_lost_blocks > 0) {
    line += fmt::format(", {} rerun for lost blocks", p.reruns_for_lost_blocks);
  }
  for (const auto& d : p.decommissions) line += " | " + formatDecommission(d);
  return line;
}

std::string formatDecommission(const DecommissionProgress& d) {
  std::string line = fmt::format(
      "{} decommissioning{}: {}/{} blocks moved, {} left, {} failed, {}/{} moved", d.agent_id,
      d.state.empty() ? "" : " (" + d.state + ")", d.blocks_migrated, d.blocksTotal(),
      d.blocks_left, d.blocks_failed, formatBytes(d.bytes_migrated), formatBytes(d.bytesTotal()));
  if (d.bytes_per_s) line += fmt::format(", {}/s", formatBytes(*d.bytes_per_s));
  if (d.eta_ms && d.blocks_left > 0) {
    line += fmt::format(", about {} left", formatDuration(std::chrono::milliseconds(*d.eta_ms)));
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

std::string htmlEscape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

}  // namespace dockhand::driver
