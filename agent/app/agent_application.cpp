#include "app/agent_application.h"

#include <iostream>
#include <memory>

#include <Poco/Util/HelpFormatter.h>
#include <Poco/Util/Option.h>
#include <Poco/Util/OptionException.h>

#include <fmt/format.h>

#include "app/agent.h"
#include "app/log_setup.h"
#include "core/exit_codes.h"
#include "dockhand/base/logging.h"
#include "dockhand/plugin.h"
#include "host_info.h"

extern char** environ;

namespace dockhand::agent {

namespace {

constexpr const char* kVersion = DOCKHAND_VERSION;

std::vector<std::string> environment() {
  std::vector<std::string> out;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) out.emplace_back(*e);
  return out;
}

}  // namespace

AgentApplication::AgentApplication() { setUnixOptions(true); }

int AgentApplication::start(int argc, char** argv) {
  try {
    init(argc, argv);
  } catch (const Poco::Util::OptionException& e) {
    std::cerr << "dockhand: " << e.displayText() << "\n\n";
    printUsage(std::cerr);
    return toInt(agent::ExitCode::kUsage);
  }
  return run();
}

void AgentApplication::defineOptions(Poco::Util::OptionSet& options) {
  using Poco::Util::Option;
  // Deliberately not ServerApplication's: the agent runs in the foreground (systemd, a
  // cluster manager or a driver supervise it), so --daemon/--pidfile are not offered.
  Application::defineOptions(options);  // NOLINT(bugprone-parent-virtual-call): see above
  options.addOption(Option("help", "h", "print this help and exit"));
  options.addOption(Option("version", "", "print the version and exit"));
  options.addOption(Option("config", "",
                           "read settings from this JSON file and its fragments FILE.d/*.json "
                           "(repeatable; later files, DOCKHAND_* variables and the command "
                           "line override it)")
                        .argument("FILE")
                        .repeatable(true));
  options.addOption(Option("driver-url", "",
                           "the driver to connect to, ws://HOST:PORT/ "
                           "(required)")
                        .argument("URL"));
  options.addOption(Option("executor-id", "",
                           "this executor's id, unique in the application "
                           "(required)")
                        .argument("ID"));
  options.addOption(Option("app-id", "", "the application id (required)").argument("ID"));
  options.addOption(Option("cores", "",
                           "cores offered to tasks (default: the CPUs this process may use, "
                           "under its cgroup's quota)")
                        .argument("N"));
  options.addOption(Option("hostname", "",
                           "the host name to advertise (default: this "
                           "machine's name)")
                        .argument("HOST"));
  options.addOption(Option("bind-address", "",
                           "the address to bind servers to (default: the "
                           "hostname)")
                        .argument("ADDR"));
  options.addOption(Option("resourcesFile", "",
                           "a Spark-format resources file with the "
                           "addresses of this executor's resources")
                        .argument("FILE"));
  options.addOption(
      Option("worker-url", "", "exit when this worker goes away (host:port)").argument("URL"));
  options.addOption(
      Option("resourceProfileId", "", "the resource profile id (default 0)").argument("ID"));
  options.addOption(
      Option("work-dir", "", "where task directories and blocks live").argument("DIR"));
  options.addOption(Option("log-level", "",
                           "trace, debug, info, warn, error or off "
                           "(default info)")
                        .argument("LEVEL"));
  options.addOption(Option("log-format", "",
                           "text or json: one JSON object per log line on stderr "
                           "(default text)")
                        .argument("FORMAT"));
  options.addOption(Option("plugin-dir", "", "search this directory for plugins (repeatable)")
                        .argument("DIR")
                        .repeatable(true));
  options.addOption(Option("auth-secret-file", "",
                           "authenticate with the cluster secret in FILE (mode 0600 or "
                           "stricter; see docs/security.md)")
                        .argument("FILE"));
}

void AgentApplication::handleOption(const std::string& name, const std::string& value) {
  Application::handleOption(name, value);
  if (name == "help") {
    help_ = true;
    stopOptionsProcessing();
  } else if (name == "version") {
    version_ = true;
    stopOptionsProcessing();
  } else if (name == "config") {
    config_files_.push_back(value);
  } else {
    overrides_.emplace_back(name, value);
  }
}

void AgentApplication::printUsage(std::ostream& out) const {
  Poco::Util::HelpFormatter formatter(options());
  formatter.setUnixStyle(true);
  formatter.setCommand("dockhand");
  formatter.setUsage("[options]");
  formatter.setHeader(
      "Dockhand node agent: connects to a driver, registers this machine's cores and "
      "resources, runs the driver's tasks and reports their status.");
  std::string footer = "Exit codes:\n";
  for (const auto& info : kExitCodeTable) {
    footer += fmt::format("  {:>3}  {:<24} {}\n", toInt(info.code), info.name, info.meaning);
  }
  footer +=
      "\nEnvironment: DOCKHAND_LOG_URL_<NAME> and DOCKHAND_EXECUTOR_ATTRIBUTE_<NAME> "
      "(or SPARK_...) are sent to the driver at registration.";
  footer += "\nOverrides (over config files, under the command line):";
  for (const auto& o : environmentOverrides()) {
    footer += fmt::format(" {}", o.variable);
  }
  footer +=
      "\n\nSubcommands: dockhand config validate [FILE], dockhand config show [--config FILE]";
  formatter.setFooter(footer);
  formatter.format(out);
}

int AgentApplication::main(const std::vector<std::string>& args) {
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
  blockAgentSignals(config);
  std::unique_ptr<Agent> agent;
  try {
    agent = std::make_unique<Agent>(std::move(config));
  } catch (const StartupError& e) {
    if (e.configError()) {
      std::cerr << "dockhand: config error: " << e.what() << "\n";
    } else {
      log->critical("{}", e.what());
    }
    return toInt(e.code());
  }
  return agent->run();
}

}  // namespace dockhand::agent
