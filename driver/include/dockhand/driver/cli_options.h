// The dockhand-driver command line as data: CliOptions, what parseCliArgs makes of argv
// (every option of every command, checked against the command it is given to), and the usage
// text. Pure code, no I/O: a bad argument throws UsageError, which runCli turns into the
// usage text and exit code 64.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

namespace dockhand::driver {

// A wrong argument: unknown option, bad value, option of another command.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// HOST:PORT of --listen (where agents connect) and of decommission's --driver.
struct HostPort {
  std::string host = "127.0.0.1";
  std::uint16_t port = 0;
};

// Parses HOST:PORT ("[::1]:7077" too). Throws UsageError naming --listen, for --driver as well.
HostPort parseListen(const std::string& text);

struct CliOptions {
  std::string command;  // "run", "serve", "decommission", "fetch" or "report"
  std::string job_file;
  int local_agents = 2;
  int cores = 2;
  std::optional<int> min_agents;
  std::string agent_bin;
  HostPort listen;
  std::string port_file;
  std::string config_file;
  std::optional<long> timeout_s;
  bool keep_work_dirs = false;
  bool quiet = false;
  std::string log_level;
  std::string log_format = "text";  // --log-format: text or json
  bool log_format_given = false;    // run: the local agents get --log-format too
  std::string agent_config;
  std::string auth_secret_file;
  std::optional<int> launch_ahead;  // --launch-ahead: overrides the config's launch_ahead
  std::string decommission_id;      // run: agent to decommission; decommission: the executor
  long decommission_after_ms = 0;
  long linger_s = 0;        // run: keep serving this long after the report
  std::string results_dir;  // run: where each task's whole value is written
  std::string event_log;    // run, serve: the event log to append to; report: the one read
  std::string html;         // report: where the timeline page is written
  std::string driver;       // decommission: HOST:PORT
  std::string fetch_url;    // fetch: the URL
  std::string reason = "dockhand-driver decommission";
  bool wait = false;  // decommission: until the executor has left, printing its progress
  bool help = false;
  bool version = false;
};

// Parses argv (argv[0] is the program). With --help or --version nothing else is checked.
// Throws UsageError.
CliOptions parseCliArgs(int argc, char** argv);

// The text --help prints (and a usage error after its message).
std::string_view cliUsage();

}  // namespace dockhand::driver
