// The timeline page of `dockhand-driver report EVENT_LOG --html OUT`: for each job of an event
// log, its task launches as bars over time, one row per agent and slot (launches that overlap
// on an agent take separate slots), coloured by how each ended. One self-contained HTML file
// (an inline SVG per job, no script), which any browser opens from disk.
#pragma once

#include <string>
#include <vector>

#include "dockhand/driver/event_log.h"

namespace dockhand::driver {

// Each launch is a <rect class="task STATE"> (STATE: finished, failed, killed, lost, or
// running for one the log never saw end) with data-task, data-agent and data-state, and a
// <title> a browser shows on hover.
std::string timelineHtml(const std::vector<LoggedJob>& jobs, const std::string& source);

}  // namespace dockhand::driver
