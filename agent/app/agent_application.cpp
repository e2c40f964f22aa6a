#include "app/agent_application.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <memory>
#include <ostream>
#include <stdexcept>
#include <string_view>

#include <fmt/format.h>

#include "app/agent.h"
#include "app/log_setup.h"
#include "app/signal_thread.h"
#include "core/exit_codes.h"
#include "dockhand/base/logging.h"
#include "dockhand/plugin.h"
#include "host_info.h"

extern char** environ;

namespace dockhand::agent {

namespace {

constexpr const char* kVersion = DOCKHAND_VERSION;
constexpr std::size_t kHelpWidth = 80;
constexpr std::size_t kDescriptionColumn = 27;

std::vector<std::string> environment() {
  std::vector<std::string> out;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) out.emplace_back(*e);
  return out;
}

// `text` broken into lines of at most `width` columns (a word longer than that gets a line of
// its own), the first starting after `first` (already written), the others indented by
// `indent` spaces.
std::string wrapped(const std::string& first, std::string_view text, std::size_t indent,
                    std::size_t width = kHelpWidth) {
  std::string out = first;
  const std::size_t line_start = first.rfind('\n');
  std::size_t column =
      line_start == std::string::npos ? first.size() : first.size() - line_start - 1;
  std::size_t at = 0;
  bool line_has_words = false;
  while (at < text.size()) {
    const std::size_t word_end = std::min(text.find(' ', at), text.size());
    const std::size_t length = word_end - at;
    if (line_has_words && column + 1 + length > width) {
      out.append("\n").append(indent, ' ');
      column = indent;
      line_has_words = false;
    }
    if (line_has_words) {
      out += ' ';
      ++column;
    } else if (column < indent) {
      out.append(indent - column, ' ');
      column = indent;
    }
    out.append(text, at, length);
    column += length;
    line_has_words = true;
    at = word_end + 1;
  }
  return out + "\n";
}

const CommandOption* findLong(const std::vector<CommandOption>& table, const std::string& name) {
  for (const auto& option : table) {
    if (option.name == name) return &option;
  }
  return nullptr;
}

const CommandOption* findShort(const std::vector<CommandOption>& table, const std::string& name) {
  for (const auto& option : table) {
    if (!option.short_name.empty() && option.short_name == name) return &option;
  }
  return nullptr;
}

}  // namespace

const std::vector<CommandOption>& agentCommandOptions() {
  // Deliberately no --daemon or --pidfile: the agent runs in the foreground (systemd, a
  // cluster manager or a driver supervise it).
  static const std::vector<CommandOption> kOptions = {
      {"help", "h", "", false, "print this help and exit"},
      {"version", "", "", false, "print the version and exit"},
      {"config", "", "FILE", true,
       "read settings from this JSON file and its fragments FILE.d/*.json (repeatable; later "
       "files, DOCKHAND_* variables and the command line override it)"},
      {"driver-url", "", "URL", false, "the driver to connect to, ws://HOST:PORT/ (required)"},
      {"executor-id", "", "ID", false, "this executor's id, unique in the application (required)"},
      {"app-id", "", "ID", false, "the application id (required)"},
      {"cores", "", "N", false,
       "cores offered to tasks (default: the CPUs this process may use, under its cgroup's "
       "quota)"},
      {"hostname", "", "HOST", false, "the host name to advertise (default: this machine's name)"},
      {"bind-address", "", "ADDR", false, "the address to bind servers to (default: the hostname)"},
      {"resourcesFile", "", "FILE", false,
       "a Spark-format resources file with the addresses of this executor's resources"},
      {"worker-url", "", "URL", false, "exit when this worker goes away (host:port)"},
      {"resourceProfileId", "", "ID", false, "the resource profile id (default 0)"},
      {"work-dir", "", "DIR", false, "where task directories and blocks live"},
      {"log-level", "", "LEVEL", false, "trace, debug, info, warn, error or off (default info)"},
      {"log-format", "", "FORMAT", false,
       "text or json: one JSON object per log line on stderr (default text)"},
      {"plugin-dir", "", "DIR", true, "search this directory for plugins (repeatable)"},
      {"auth-secret-file", "", "FILE", false,
       "authenticate with the cluster secret in FILE (mode 0600 or stricter; see "
       "docs/security.md)"},
  };
  return kOptions;
}

ParsedCommandLine parseCommandLine(const std::vector<CommandOption>& table,
                                   const std::vector<std::string>& args) {
  ParsedCommandLine parsed;
  std::vector<std::string> seen;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") {
      parsed.arguments.insert(parsed.arguments.end(), args.begin() + static_cast<long>(i) + 1,
                              args.end());
      break;
    }
    if (arg.size() < 2 || arg[0] != '-') {
      parsed.arguments.push_back(arg);
      continue;
    }
    const bool is_long = arg.compare(0, 2, "--") == 0;
    const std::size_t equals = is_long ? arg.find('=') : std::string::npos;
    const std::string name = is_long ? arg.substr(2, equals - 2) : arg.substr(1);
    const CommandOption* option = is_long ? findLong(table, name) : findShort(table, name);
    if (option == nullptr) {
      throw std::invalid_argument(fmt::format("unknown option '{}'", arg.substr(0, equals)));
    }
    std::string value;
    if (option->argument.empty()) {
      if (equals != std::string::npos) {
        throw std::invalid_argument(fmt::format("option --{} takes no value", option->name));
      }
    } else if (equals != std::string::npos) {
      value = arg.substr(equals + 1);
    } else if (i + 1 < args.size()) {
      value = args[++i];
    } else {
      throw std::invalid_argument(
          fmt::format("option --{} requires a value ({})", option->name, option->argument));
    }
    if (!option->repeatable && std::find(seen.begin(), seen.end(), option->name) != seen.end()) {
      throw std::invalid_argument(fmt::format("option --{} is given more than once", option->name));
    }
    seen.push_back(option->name);
    parsed.options.emplace_back(option->name, std::move(value));
  }
  return parsed;
}

int AgentApplication::start(int argc, char** argv) {
  argv_.assign(argv, argv + argc);
  std::error_code ec;
  program_ = std::filesystem::read_symlink("/proc/self/exe", ec).string();
  if (ec && argc > 0) program_ = argv[0];
  ParsedCommandLine parsed;
  try {
    parsed = parseCommandLine(agentCommandOptions(),
                              std::vector<std::string>(argv + std::min(argc, 1), argv + argc));
  } catch (const std::invalid_argument& e) {
    std::cerr << "dockhand: " << e.what() << "\n\n";
    printUsage(std::cerr);
    return toInt(agent::ExitCode::kUsage);
  }
  for (auto& [name, value] : parsed.options) {
    if (name == "help") {
      help_ = true;
    } else if (name == "version") {
      version_ = true;
    } else if (name == "config") {
      config_files_.push_back(std::move(value));
    } else {
      overrides_.emplace_back(name, std::move(value));
    }
  }
  return run(parsed.arguments);
}

void AgentApplication::printUsage(std::ostream& out) {
  std::string text = "usage: dockhand [options]\n\n";
  text += wrapped("",
                  "Dockhand node agent: connects to a driver, registers this machine's cores "
                  "and resources, runs the driver's tasks and reports their status.",
                  0);
  text += "\nOptions:\n";
  for (const auto& option : agentCommandOptions()) {
    std::string left = "  ";
    if (!option.short_name.empty()) left.append("-").append(option.short_name).append(", ");
    left.append("--").append(option.name);
    if (!option.argument.empty()) left.append("=").append(option.argument);
    if (left.size() + 1 > kDescriptionColumn) left.append("\n");
    text += wrapped(left, option.description, kDescriptionColumn);
  }
  text += "\nExit codes:\n";
  for (const auto& info : kExitCodeTable) {
    text += wrapped(fmt::format("  {:>3}  {:<24}", toInt(info.code), info.name), info.meaning,
                    kDescriptionColumn + 5);
  }
  text += "\n";
  text += wrapped("",
                  "Environment: DOCKHAND_LOG_URL_<NAME> and DOCKHAND_EXECUTOR_ATTRIBUTE_<NAME> "
                  "(or SPARK_...) are sent to the driver at registration.",
                  0);
  std::string overrides = "Overrides (over config files, under the command line):";
  for (const auto& o : environmentOverrides()) overrides.append(" ").append(o.variable);
  text += wrapped("", overrides, 0);
  text += "\n";
  text += wrapped("",
                  "Subcommands: dockhand config validate [FILE], dockhand config show "
                  "[--config FILE], dockhand plugins ..., dockhand discover ...",
                  0);
  out << text;
}

int AgentApplication::run(const std::vector<std::string>& args) {
  if (help_) {
    printUsage(std::cout);
    return toInt(agent::ExitCode::kSuccess);
  }
  if (version_) {
    std::cout << "dockhand " << kVersion << " (protocol " << protocol::kProtocolVersion
              << ", plugin ABI " << DH_ABI_MAJOR << "." << DH_ABI_MINOR << ")\n";
    return toInt(agent::ExitCode::kSuccess);
  }
  if (!args.empty()) {
    std::cerr << "dockhand: unexpected argument '" << args.front() << "'\n\n";
    printUsage(std::cerr);
    return toInt(agent::ExitCode::kUsage);
  }

  AgentConfig config;
  try {
    // Required keys are checked below (a usage error, 64), the rest here (2).
    loadConfig(ConfigSources{config_files_, environment(), overrides_}, config);
  } catch (const ConfigError& e) {
    bool only_missing = true;
    for (const auto& problem : e.problems()) {
      only_missing = only_missing && problem.message.rfind("is required", 0) == 0;
    }
    if (!only_missing) {
      for (const auto& problem : e.problems()) {
        std::cerr << "dockhand: config error: " << problem.text() << "\n";
      }
      return toInt(agent::ExitCode::kConfigError);
    }
  }
  applyEnvironment(environment(), config);
  auto missing = missingRequired(config);
  if (!missing.empty()) {
    std::string list;
    for (const auto& m : missing) list += (list.empty() ? "" : ", ") + m;
    std::cerr << "dockhand: missing required option(s): " << list << "\n\n";
    printUsage(std::cerr);
    return toInt(agent::ExitCode::kUsage);
  }
  applyDefaults(config);
  return runAgent(std::move(config));
}

int AgentApplication::runAgent(AgentConfig config) {
  auto level = parseLogLevel(config.log_level);
  if (!level) {
    std::cerr << "dockhand: config error: log_level: unknown level '" << config.log_level
              << "' (trace, debug, info, warn, error, off)\n";
    return toInt(agent::ExitCode::kConfigError);
  }
  auto format = parseLogFormat(config.log_format);
  if (!format) {
    std::cerr << "dockhand: config error: log_format: unknown format '" << config.log_format
              << "' (text or json)\n";
    return toInt(agent::ExitCode::kConfigError);
  }
  setupLogging(*level, *format, config.executor_id);
  auto log = dockhand::logger("agent");
  if (config.cores <= 0) {
    const auto host = dockhand::host::probeHost();
    config.cores = host.effective_cpus;
    log->info(
        "no --cores given: offering {} core(s), this host's effective CPU count ({} online, "
        "{} in the affinity mask, cgroup quota {})",
        config.cores, host.online_cpus, host.affinity_cpus,
        host.cgroup_cpu_limit ? fmt::format("{:g}", *host.cgroup_cpu_limit) : "none");
  }
  // Every thread created from here on inherits the mask; the agent's signal thread takes them.
  blockAgentSignals(decommissionSignalNumber(config.decommission.signal));
  std::unique_ptr<Agent> agent;
  try {
    agent = std::make_unique<Agent>(std::move(config), [this]() -> Result<AgentConfig> {
      // The same sources, read the same way as at start.
      AgentConfig again;
      try {
        loadConfig(ConfigSources{config_files_, environment(), overrides_}, again);
      } catch (const ConfigError& e) {
        std::string problems;
        for (const auto& problem : e.problems()) {
          problems += (problems.empty() ? "" : "; ") + problem.text();
        }
        return Error("the configuration does not load: " + problems);
      }
      applyEnvironment(environment(), again);
      applyDefaults(again);
      return again;
    });
  } catch (const StartupError& e) {
    if (e.configError()) {
      std::cerr << "dockhand: config error: " << e.what() << "\n";
    } else {
      log->critical("{}", e.what());
    }
    return toInt(e.code());
  }
  const int code = agent->run();
  agent.reset();
  if (code != toInt(ExitCode::kRestartInPlace)) return code;
  // The agent has stopped every part and kept its session: this process becomes the program
  // at the same path (a package upgrade's new file there), with the same arguments. The PID,
  // the service manager's view of it and the work directory stay.
  log->info("restarting in place: executing {}", program_);
  log->flush();
  std::vector<char*> args;
  args.reserve(argv_.size() + 1);
  for (std::string& arg : argv_) args.push_back(arg.data());
  args.push_back(nullptr);
  // Nothing of this process's but stdin, stdout and stderr goes on into the next one.
  ::syscall(SYS_close_range, 3U, ~0U, 0U);
  ::execv(program_.c_str(), args.data());
  const int error = errno;
  log->critical(
      "cannot restart in place: executing {} failed: {}; exiting with code {} (the session is "
      "kept: the next start resumes it)",
      program_, std::strerror(error), code);
  return code;
}

}  // namespace dockhand::agent
