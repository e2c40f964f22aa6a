#include "dockhand/driver/cli_options.h"

#include <cerrno>
#include <cstdlib>
#include <initializer_list>
#include <vector>

#include <fmt/format.h>
#include <spdlog/common.h>

#include "dockhand/base/log_format.h"
#include "dockhand/driver/defaults.h"

namespace dockhand::driver {
namespace {

constexpr const char* kUsage = R"(usage: dockhand-driver [--help] [--version] <command> [options]

commands:
  run JOB.json [options]   run a job on local agents (started here) and report each task
  serve [options]          serve agents with no job until SIGINT/SIGTERM
  decommission EXECUTOR_ID --driver HOST:PORT [--reason TEXT] [--config FILE]
               [--auth-secret-file F] [--wait [--timeout SECONDS]]
                           ask a running driver to decommission one of its agents (over
                           https:// when FILE's tls section is on; signed with the cluster
                           secret when the driver authenticates); with --wait, print its
                           progress (blocks and bytes left, rate, time left) until it left
  report EVENT_LOG [--html OUT] [--quiet]
                           print the report of each job an event log holds, as `run`
                           printed it; with --html also write a page with their timeline
  fetch URL [--config FILE] [--auth-secret-file F]
                           GET a URL of the cluster (a task's log, an agent's log, a block,
                           the control API) to stdout, signed with the cluster secret and
                           over https:// as FILE says: what curl cannot do when the cluster
                           authenticates

run options:
  --local-agents N     agents to start on this machine (default 2; 0: only external agents)
  --cores C            cores each local agent offers (default 2)
  --min-agents M       registrations to wait for before the job starts (default N)
  --agent-bin PATH     the agent program (default: dockhand next to this program)
  --listen HOST:PORT   where agents connect (default 127.0.0.1:0, an ephemeral port)
  --port-file F        write the bound port to F once listening
  --config FILE        driver config (JSON; see docs/driver.md)
  --timeout SECONDS    fail the job if it has not ended by then (default: no limit)
  --agent-config FILE  config file passed to every local agent (dockhand --config FILE)
  --decommission ID    decommission agent ID while the job runs ...
  --decommission-after-ms N  ... N ms after the job starts (default 0)
  --keep-work-dirs     keep the agents' work dirs and logs (their path is printed)
  --linger SECONDS     after the report, keep serving (/metrics, the control API)
                       for SECONDS before stopping the agents (default 0)
  --quiet              print only the summary line
  --results-dir DIR    write each finished task's whole value to DIR/<task name> and
                       every task's outcome to DIR/results.json (the report cuts values)
  --event-log FILE     append what happens (jobs, tasks with what they cost, agents,
                       blocks) to FILE, one JSON object a line (docs/driver.md)
  --log-level LEVEL    driver log level on stderr (default warn)
  --log-format FORMAT  text (default) or json: one JSON object per log line on stderr
                       (also given to the local agents)
  --auth-secret-file F require agents to prove the cluster secret in F (mode 0600; also
                       given to the local agents); overrides the config's auth_secret_file
  --launch-ahead N     send each agent up to N cores' worth of tasks beyond its free cores;
                       they wait there and start as soon as a task ends (many short tasks);
                       0: only to free cores (Spark's way); auto (the default): its cores'
                       worth while the job's tasks run 10 ms or less, 4x that while they run
                       under 1 ms; overrides the config's launch_ahead

serve options:
  --listen HOST:PORT, --port-file F, --config FILE, --log-level LEVEL (default info),
  --log-format FORMAT, --auth-secret-file F, --launch-ahead N|auto, --event-log FILE

exit codes:
  0    the job succeeded (serve: stopped by a signal; decommission: accepted;
       fetch: a 2xx answer, its body on stdout)
  1    the job failed, timed out, or could not run (agents did not register);
       decommission: no such executor, or the driver cannot be reached;
       fetch: another answer (said on stderr) or no answer
  2    a config or job file is invalid, or the agent program is missing
  64   unknown option or bad option value
  130  run: interrupted by SIGINT/SIGTERM
)";

long parseNumber(const std::string& option, const std::string& text, long min, long max) {
  char* end = nullptr;
  errno = 0;
  long value = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno != 0 || value < min || value > max) {
    throw UsageError(
        fmt::format("{} expects a whole number in [{}, {}], got '{}'", option, min, max, text));
  }
  return value;
}

}  // namespace

HostPort parseListen(const std::string& text) {
  auto colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0) {
    throw UsageError(fmt::format("--listen expects HOST:PORT, got '{}'", text));
  }
  HostPort l;
  l.host = text.substr(0, colon);
  if (l.host.size() > 2 && l.host.front() == '[' && l.host.back() == ']') {
    l.host = l.host.substr(1, l.host.size() - 2);
  }
  const std::string port = text.substr(colon + 1);
  char* end = nullptr;
  long value = std::strtol(port.c_str(), &end, 10);
  if (port.empty() || *end != '\0' || value < 0 || value > 65535) {
    throw UsageError(fmt::format("--listen: '{}' is not a port (0-65535)", port));
  }
  l.port = static_cast<std::uint16_t>(value);
  return l;
}

CliOptions parseCliArgs(int argc, char** argv) {
  CliOptions o;
  std::vector<std::string> args(argv + 1, argv + argc);
  std::vector<std::string> positional;
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string arg = args[i];
    std::optional<std::string> inline_value;
    if (arg.rfind("--", 0) == 0) {
      if (auto eq = arg.find('='); eq != std::string::npos) {
        inline_value = arg.substr(eq + 1);
        arg = arg.substr(0, eq);
      }
    }
    auto value = [&]() -> std::string {
      if (inline_value) return *inline_value;
      if (i + 1 >= args.size()) throw UsageError(fmt::format("{} needs a value", arg));
      return args[++i];
    };
    auto flag = [&] {
      if (inline_value) throw UsageError(fmt::format("{} takes no value", arg));
    };
    if (arg == "--help" || arg == "-h") {
      o.help = true;
    } else if (arg == "--version") {
      o.version = true;
    } else if (arg == "--local-agents") {
      o.local_agents = static_cast<int>(parseNumber(arg, value(), 0, 256));
    } else if (arg == "--cores") {
      o.cores = static_cast<int>(parseNumber(arg, value(), 1, 4096));
    } else if (arg == "--min-agents") {
      o.min_agents = static_cast<int>(parseNumber(arg, value(), 0, 100000));
    } else if (arg == "--agent-bin") {
      o.agent_bin = value();
    } else if (arg == "--listen") {
      o.listen = parseListen(value());
    } else if (arg == "--port-file") {
      o.port_file = value();
    } else if (arg == "--config") {
      o.config_file = value();
    } else if (arg == "--timeout") {
      o.timeout_s = parseNumber(arg, value(), 1, 100L * 365 * 86400);
    } else if (arg == "--agent-config") {
      o.agent_config = value();
    } else if (arg == "--launch-ahead") {
      const std::string text = value();
      try {
        o.launch_ahead = text == "auto" ? defaults::kLaunchAheadAuto
                                        : static_cast<int>(parseNumber(arg, text, 0, 4096));
      } catch (const UsageError&) {
        throw UsageError(fmt::format(
            "--launch-ahead expects auto or a whole number in [0, 4096], got '{}'", text));
      }
    } else if (arg == "--auth-secret-file") {
      o.auth_secret_file = value();
      if (o.auth_secret_file.empty()) throw UsageError("--auth-secret-file needs a file");
    } else if (arg == "--decommission") {
      o.decommission_id = value();
      if (o.decommission_id.empty()) throw UsageError("--decommission needs an executor id");
    } else if (arg == "--decommission-after-ms") {
      o.decommission_after_ms = parseNumber(arg, value(), 0, 365L * 86400 * 1000);
    } else if (arg == "--driver") {
      o.driver = value();
    } else if (arg == "--reason") {
      o.reason = value();
    } else if (arg == "--results-dir") {
      o.results_dir = value();
      if (o.results_dir.empty()) throw UsageError("--results-dir needs a directory");
    } else if (arg == "--event-log") {
      o.event_log = value();
      if (o.event_log.empty()) throw UsageError("--event-log needs a file");
    } else if (arg == "--html") {
      o.html = value();
      if (o.html.empty()) throw UsageError("--html needs a file");
    } else if (arg == "--linger") {
      o.linger_s = parseNumber(arg, value(), 0, 7L * 86400);
    } else if (arg == "--wait") {
      flag();
      o.wait = true;
    } else if (arg == "--keep-work-dirs") {
      flag();
      o.keep_work_dirs = true;
    } else if (arg == "--quiet" || arg == "-q") {
      flag();
      o.quiet = true;
    } else if (arg == "--log-level") {
      o.log_level = value();
      if (spdlog::level::from_str(o.log_level) == spdlog::level::off && o.log_level != "off") {
        throw UsageError(fmt::format("--log-level: unknown level '{}'", o.log_level));
      }
    } else if (arg == "--log-format") {
      o.log_format = value();
      o.log_format_given = true;
      if (!parseLogFormat(o.log_format)) {
        throw UsageError(
            fmt::format("--log-format: unknown format '{}' (text or json)", o.log_format));
      }
    } else if (arg.size() > 1 && arg[0] == '-') {
      throw UsageError(fmt::format("unknown option '{}'", arg));
    } else {
      positional.push_back(arg);
    }
  }
  if (o.help || o.version) return o;
  if (positional.empty()) {
    throw UsageError("missing command (run, serve, decommission, fetch or report)");
  }
  o.command = positional[0];
  auto reject_options = [&](std::initializer_list<const char*> options, const char* owner) {
    for (const auto& arg : args) {
      for (const char* option : options) {
        if (arg == option || arg.rfind(std::string(option) + "=", 0) == 0) {
          throw UsageError(fmt::format("{} is an option of {}, not {}", option, owner, o.command));
        }
      }
    }
  };
  if (o.command != "report") reject_options({"--html"}, "report");
  if (o.command != "decommission") reject_options({"--wait"}, "decommission");
  if (o.command == "run") {
    if (positional.size() != 2) throw UsageError("run takes exactly one job file");
    o.job_file = positional[1];
    reject_options({"--driver", "--reason"}, "decommission");
    if (o.decommission_after_ms > 0 && o.decommission_id.empty()) {
      throw UsageError("--decommission-after-ms needs --decommission EXECUTOR_ID");
    }
  } else if (o.command == "serve") {
    if (positional.size() != 1) throw UsageError("serve takes no arguments");
    reject_options({"--local-agents", "--cores", "--min-agents", "--agent-bin", "--timeout",
                    "--keep-work-dirs", "--quiet", "--agent-config", "--decommission",
                    "--decommission-after-ms", "--linger", "--results-dir"},
                   "run");
    reject_options({"--driver", "--reason"}, "decommission");
  } else if (o.command == "decommission") {
    if (positional.size() != 2) throw UsageError("decommission takes exactly one executor id");
    o.decommission_id = positional[1];
    if (o.driver.empty()) throw UsageError("decommission needs --driver HOST:PORT");
    parseListen(o.driver);  // validates HOST:PORT
    reject_options({"--local-agents", "--cores", "--min-agents", "--agent-bin", "--keep-work-dirs",
                    "--agent-config", "--decommission", "--decommission-after-ms", "--listen",
                    "--port-file", "--linger", "--launch-ahead", "--results-dir", "--event-log"},
                   "run or serve");
    if (o.timeout_s && !o.wait) throw UsageError("--timeout of decommission needs --wait");
  } else if (o.command == "report") {
    if (positional.size() != 2) throw UsageError("report takes exactly one event log");
    if (!o.event_log.empty()) throw UsageError("report reads the event log it is given");
    o.event_log = positional[1];
    reject_options({"--local-agents", "--cores", "--min-agents", "--agent-bin", "--timeout",
                    "--keep-work-dirs", "--agent-config", "--decommission",
                    "--decommission-after-ms", "--listen", "--port-file", "--linger",
                    "--launch-ahead", "--results-dir", "--config", "--auth-secret-file"},
                   "run or serve");
    reject_options({"--driver", "--reason"}, "decommission");
  } else if (o.command == "fetch") {
    if (positional.size() != 2) throw UsageError("fetch takes exactly one URL");
    o.fetch_url = positional[1];
    reject_options({"--local-agents", "--cores", "--min-agents", "--agent-bin", "--timeout",
                    "--keep-work-dirs", "--agent-config", "--decommission",
                    "--decommission-after-ms", "--listen", "--port-file", "--linger", "--quiet",
                    "--launch-ahead", "--results-dir", "--event-log"},
                   "run or serve");
    reject_options({"--driver", "--reason"}, "decommission");
  } else {
    throw UsageError(fmt::format(
        "unknown command '{}' (expected run, serve, decommission, fetch or report)", o.command));
  }
  return o;
}

std::string_view cliUsage() { return kUsage; }

}  // namespace dockhand::driver
