#include "support/agent_command.h"

#include <stdexcept>

#include "support/process.h"

namespace dockhand::testing {

std::vector<std::string> AgentCommand::argv() const {
  if (work_dir.empty()) {
    // Without one the agent would write under $TMPDIR/dockhand, outside the test's TempDir.
    throw std::invalid_argument("AgentCommand for '" + executor_id + "' has no work_dir");
  }
  std::vector<std::string> args = {agentBinary()};
  if (!config.empty()) args.insert(args.end(), {"--config", config.string()});
  args.insert(args.end(), {"--driver-url", driver_url, "--executor-id", executor_id, "--app-id",
                           app_id, "--cores", std::to_string(cores), "--hostname", hostname,
                           "--work-dir", work_dir.string()});
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

}  // namespace dockhand::testing
