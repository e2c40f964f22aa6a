// Task processes an earlier process of the agent left running on the same work directory.
//
// A task runs in its directory <work_dir>/tasks/task-<id>/ (its working directory), in a
// process group of its own. When the agent's process ends without stopping its tasks (killed,
// crashed) and no service manager ends them with it (systemd ends the unit's cgroup; an agent
// started by hand has none), they run on unwatched: their ends are never reported and the
// driver runs them again elsewhere. The next agent on that work directory finds them by their
// working directory and kills their process groups, so that no task runs twice at once.
// A task that left its directory (chdir) is not found this way; a service manager's cgroup is
// the sure way.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

namespace dockhand::agent {

struct LeftoverTask {
  pid_t pid = 0;
  pid_t pgid = 0;
  std::string directory;  // its working directory
};

// Finds the processes whose working directory lies under <work_dir>/tasks/ and that lead a
// process group (not a session: a shell opened there is no task) and kills each group
// (SIGKILL). Returns what it killed. Processes it may not look at (another user's, for an
// agent that is not root) are passed over.
// Tasks in `keep` (their directory is tasks/task-<id>) are passed over: those a restart in
// place handed over to this program.
std::vector<LeftoverTask> killLeftoverTasks(const std::filesystem::path& work_dir,
                                            const std::set<std::uint64_t>& keep = {});

}  // namespace dockhand::agent
