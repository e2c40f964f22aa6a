#include "dockhand/driver/timeline.h"

#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "dockhand/driver/report.h"

namespace dockhand::driver {

namespace {

constexpr int kPlotWidth = 960;   // px for the job's whole span
constexpr int kLabelWidth = 170;  // px for the row labels
constexpr int kRowHeight = 22;
constexpr int kBarHeight = 16;
constexpr int kAxisHeight = 28;

std::string stateClass(const std::string& state) {
  if (state.empty()) return "running";
  std::string lower = state;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return lower;
}

struct Bar {
  const LoggedAttempt* attempt;
  std::int64_t end_ms;
  std::size_t row;
};

std::string jobSvg(const LoggedJob& job) {
  const std::int64_t start = job.start_ms;
  std::int64_t end = job.ended ? job.end_ms : start;
  for (const auto& a : job.attempts) end = std::max({end, a.start_ms, a.end_ms});
  const std::int64_t span = std::max<std::int64_t>(end - start, 1);

  // Rows: per agent (in name order), launches packed into the fewest slots.
  std::map<std::string, std::vector<const LoggedAttempt*>> by_agent;
  for (const auto& a : job.attempts) by_agent[a.agent].push_back(&a);
  std::vector<std::string> row_labels;
  std::vector<Bar> bars;
  for (auto& [agent, attempts] : by_agent) {
    std::stable_sort(attempts.begin(), attempts.end(),
                     [](const auto* a, const auto* b) { return a->start_ms < b->start_ms; });
    std::vector<std::int64_t> slot_free;  // when each slot's last bar ends
    const std::size_t first_row = row_labels.size();
    for (const auto* a : attempts) {
      const std::int64_t bar_end = a->end_ms > 0 ? a->end_ms : end;
      std::size_t slot = 0;
      while (slot < slot_free.size() && slot_free[slot] > a->start_ms) ++slot;
      if (slot == slot_free.size()) {
        slot_free.push_back(bar_end);
        row_labels.push_back(fmt::format("{} #{}", agent, slot + 1));
      } else {
        slot_free[slot] = bar_end;
      }
      bars.push_back({a, bar_end, first_row + slot});
    }
  }

  const int height = kAxisHeight + static_cast<int>(row_labels.size()) * kRowHeight + 4;
  const int width = kLabelWidth + kPlotWidth + 20;
  auto x = [&](std::int64_t ms) {
    return kLabelWidth + static_cast<double>(ms - start) * kPlotWidth / static_cast<double>(span);
  };
  std::string svg = fmt::format(
      "<svg class=\"timeline\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\">\n",
      width, height);
  // The time axis: five ticks over the span.
  for (int i = 0; i <= 4; ++i) {
    const std::int64_t at = start + span * i / 4;
    const char* anchor = i == 0 ? "start" : i == 4 ? "end" : "middle";
    svg += fmt::format(
        "<line class=\"tick\" x1=\"{0:.1f}\" x2=\"{0:.1f}\" y1=\"{1}\" y2=\"{2}\"/>"
        "<text class=\"axis\" x=\"{0:.1f}\" y=\"14\" text-anchor=\"{4}\">{3}</text>\n",
        x(at), kAxisHeight - 6, height, htmlEscape(formatDuration(Millis(at - start))), anchor);
  }
  for (std::size_t r = 0; r < row_labels.size(); ++r) {
    svg += fmt::format("<text class=\"row\" x=\"4\" y=\"{}\">{}</text>\n",
                       kAxisHeight + static_cast<int>(r) * kRowHeight + kBarHeight - 3,
                       htmlEscape(row_labels[r]));
  }
  for (const auto& bar : bars) {
    const auto& a = *bar.attempt;
    const double left = x(a.start_ms);
    const double w = std::max(1.0, x(bar.end_ms) - left);
    const std::string state = a.state.empty() ? "RUNNING" : a.state;
    svg += fmt::format(
        "<rect class=\"task {}\" data-task=\"{}\" data-agent=\"{}\" data-state=\"{}\" "
        "x=\"{:.1f}\" y=\"{}\" width=\"{:.1f}\" height=\"{}\"><title>{} (task {}) on {}: {}, "
        "{}</title></rect>\n",
        stateClass(a.state), htmlEscape(a.task), htmlEscape(a.agent), htmlEscape(state), left,
        kAxisHeight + static_cast<int>(bar.row) * kRowHeight, w, kBarHeight, htmlEscape(a.task),
        a.task_id, htmlEscape(a.agent), htmlEscape(state),
        htmlEscape(formatDuration(Millis(bar.end_ms - a.start_ms))));
  }
  svg += "</svg>\n";
  return svg;
}

}  // namespace

std::string timelineHtml(const std::vector<LoggedJob>& jobs, const std::string& source) {
  std::string html = fmt::format(
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
      "<title>Dockhand timeline: {0}</title>\n<style>\n"
      "body {{ font: 13px sans-serif; margin: 16px; color: #222; }}\n"
      "h2 {{ font-size: 15px; margin: 18px 0 4px; }}\n"
      ".summary {{ margin: 0 0 6px; color: #555; }}\n"
      ".legend span {{ display: inline-block; padding: 1px 8px; margin-right: 6px; color: #fff; "
      "border-radius: 3px; }}\n"
      ".timeline text {{ font: 11px sans-serif; fill: #333; }}\n"
      ".timeline .tick {{ stroke: #ddd; }}\n"
      ".task.finished, .legend .finished {{ fill: #43a047; background: #43a047; }}\n"
      ".task.failed, .legend .failed {{ fill: #e53935; background: #e53935; }}\n"
      ".task.killed, .legend .killed {{ fill: #757575; background: #757575; }}\n"
      ".task.lost, .legend .lost {{ fill: #fb8c00; background: #fb8c00; }}\n"
      ".task.running, .legend .running {{ fill: #64b5f6; background: #64b5f6; }}\n"
      "</style></head><body>\n<h1>Timeline of {0}</h1>\n"
      "<p class=\"legend\"><span class=\"finished\">finished</span><span "
      "class=\"failed\">failed</span><span class=\"killed\">killed</span><span "
      "class=\"lost\">lost</span><span class=\"running\">no end logged</span></p>\n",
      htmlEscape(source));
  if (jobs.empty()) html += "<p>The log holds no job.</p>\n";
  for (const auto& job : jobs) {
    const auto& r = job.report;
    html += fmt::format("<section class=\"job\">\n<h2>{} {}</h2>\n", htmlEscape(r.job.name),
                        job.ended ? htmlEscape(std::string(toString(r.state))) : "(no end logged)");
    html += fmt::format("<p class=\"summary\">{} task(s), {} launch(es){}</p>\n", r.tasks.size(),
                        job.attempts.size(),
                        job.ended ? fmt::format(", wall {}", formatDuration(r.wall)) : "");
    html += jobSvg(job);
    html += "</section>\n";
  }
  html += "</body></html>\n";
  return html;
}

}  // namespace dockhand::driver
