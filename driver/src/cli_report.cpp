// dockhand-driver report EVENT_LOG [--html OUT]: the report of each job an event log holds, as
// `run` printed it, and the timeline page.
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>
#include <stdexcept>

#include "dockhand/driver/cli.h"
#include "dockhand/driver/cli_options.h"
#include "dockhand/driver/event_log.h"
#include "dockhand/driver/timeline.h"

namespace dockhand::driver {

int reportCommand(const CliOptions& o) {
  std::ifstream in(o.event_log);
  if (!in) {
    throw std::runtime_error("cannot read the event log " + o.event_log + ": " +
                             std::strerror(errno));
  }
  auto jobs = readEventLog(in, o.event_log);
  if (!jobs) throw std::runtime_error(jobs.error().message);
  for (const auto& job : *jobs) {
    if (!job.ended) {
      std::cout << "job " << job.report.job.name
                << ": no end in the log (the driver stopped before the job ended)\n";
      continue;
    }
    std::cout << formatReport(job.report.view(), o.quiet);
  }
  if (jobs->empty()) std::cerr << "dockhand-driver: " << o.event_log << " holds no job\n";
  if (!o.html.empty()) {
    std::ofstream out(o.html, std::ios::trunc);
    out << timelineHtml(*jobs, o.event_log);
    out.close();
    if (!out) throw std::runtime_error("cannot write " + o.html + ": " + std::strerror(errno));
  }
  std::cout << std::flush;
  return static_cast<int>(DriverExit::kSuccess);
}

}  // namespace dockhand::driver
