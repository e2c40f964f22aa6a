#include "app/agent_application.h"

#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <mutex>
#include <thread>

#include <Poco/URI.h>
#include <Poco/Util/HelpFormatter.h>
#include <Poco/Util/Option.h>
#include <Poco/Util/OptionException.h>

#include <fmt/ranges.h>

#include "app/agent_runtime.h"
#include "app/log_setup.h"
#include "app/systemd_notify.h"
#include "blocks/block_server.h"
#include "blocks/block_store.h"
#include "core/backend.h"
#include "core/event_loop.h"
#include "core/exit_codes.h"
#include "core/logging.h"
#include "decommission/plugin_decommissioner.h"
#include "dockhand/plugin.h"
#include "host_info.h"
#include "rpc/websocket_link.h"
#include "rpc/worker_watcher.h"

extern char** environ;

namespace dockhand::agent {

namespace {

constexpr const char* kVersion = DOCKHAND_VERSION;

// Signals handled by the agent's signal thread rather than by default actions: the stop
// signals and the decommission signal (0: none).
sigset_t handledSignals(int decommission_signal) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGHUP);
  if (decommission_signal > 0) sigaddset(&set, decommission_signal);
  return set;
}

// Waits for SIGTERM/SIGINT/SIGHUP (stop) and the decommission signal on its own thread and
// turns them into core events.
class SignalThread {
 public:
  SignalThread(EventSink& sink, Backend& backend, int decommission_signal)
      : sink_(sink), backend_(backend), decommission_signal_(decommission_signal) {
    thread_ = std::thread([this] { run(); });
  }
  ~SignalThread() {
    stop_ = true;
    thread_.join();
  }
  SignalThread(const SignalThread&) = delete;
  SignalThread& operator=(const SignalThread&) = delete;

 private:
  void run() {
    sigset_t set = handledSignals(decommission_signal_);
    timespec timeout{0, 200 * 1000 * 1000};
    while (!stop_) {
      int sig = sigtimedwait(&set, nullptr, &timeout);
      if (sig <= 0) continue;
      if (sig == decommission_signal_) {
        sink_.post([this] { backend_.onDecommissionSignal(); });
        continue;
      }
      std::string reason = std::string("received ") + sigabbrev_np(sig);
      sink_.post([this, reason] { backend_.onStopRequested(reason); });
    }
  }

  EventSink& sink_;
  Backend& backend_;
  int decommission_signal_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// The agent's state for the block server's /v1/status: refreshed on the core thread, read on
// the server's threads.
class StatusBoard {
 public:
  void set(nlohmann::json status) {
    std::lock_guard lock(mutex_);
    status_ = std::move(status);
  }
  nlohmann::json get() const {
    std::lock_guard lock(mutex_);
    return status_;
  }

 private:
  mutable std::mutex mutex_;
  nlohmann::json status_ = nlohmann::json::object();
};

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
  Application::defineOptions(options);
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
  setupLogging(*level);
  auto log = agent::logger("agent");
  if (config.cores <= 0) {
    const auto host = dockhand::host::probeHost();
    config.cores = host.effective_cpus;
    log->info(
        "no --cores given: offering {} core(s), this host's effective CPU count ({} online, "
        "{} in the affinity mask, cgroup quota {})",
        config.cores, host.online_cpus, host.affinity_cpus,
        host.cgroup_cpu_limit ? fmt::format("{:g}", *host.cgroup_cpu_limit) : "none");
  }

  BackendOptions options;
  std::optional<protocol::auth::ClusterSecret> secret;
  Poco::Net::Context::Ptr tls_server;
  Poco::Net::Context::Ptr tls_client;
  try {
    if (!config.auth_secret_file.empty()) {
      secret = protocol::auth::loadSecretFile(config.auth_secret_file);
    }
    if (config.tls.enabled) {
      tls_server = tls::makeContext(config.tls, tls::Role::kServer);
      tls_client = tls::makeContext(config.tls, tls::Role::kClient);
    }
    Poco::URI uri(config.driver_url);
    const char* scheme = config.tls.enabled ? "wss" : "ws";
    if (uri.getScheme() != scheme || uri.getHost().empty() || uri.getPort() == 0) {
      throw ConfigError(fmt::format("driver_url: expected {}://HOST:PORT/", scheme));
    }
    if (!config.worker_url.empty()) parseWorkerUrl(config.worker_url);
    if (!config.resources_file.empty())
      options.resources = loadResourcesFile(config.resources_file);
    std::error_code ec;
    std::filesystem::create_directories(config.work_dir, ec);
    if (ec) {
      throw ConfigError(
          fmt::format("work_dir {}: cannot create: {}", config.work_dir, ec.message()));
    }
    // Others may pass through (tasks that run as another user reach their own directory
    // under tasks/) but not list it; what is inside is private to the agent (blocks/ 0700).
    namespace fs = std::filesystem;
    fs::permissions(config.work_dir,
                    fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec, ec);
    if (ec) {
      throw ConfigError(fmt::format("work_dir {}: cannot set its mode to 0711: {}", config.work_dir,
                                    ec.message()));
    }
  } catch (const ConfigError& e) {
    std::cerr << "dockhand: config error: " << e.what() << "\n";
    return toInt(agent::ExitCode::kConfigError);
  } catch (const protocol::auth::SecretError& e) {
    std::cerr << "dockhand: config error: auth_secret_file: " << e.what() << "\n";
    return toInt(agent::ExitCode::kConfigError);
  } catch (const tls::TlsError& e) {
    std::cerr << "dockhand: config error: " << e.what() << "\n";
    return toInt(agent::ExitCode::kConfigError);
  } catch (const Poco::Exception& e) {
    std::cerr << "dockhand: config error: driver_url '" << config.driver_url
              << "': " << e.displayText() << "\n";
    return toInt(agent::ExitCode::kConfigError);
  } catch (const std::invalid_argument& e) {
    std::cerr << "dockhand: config error: worker_url: " << e.what() << "\n";
    return toInt(agent::ExitCode::kConfigError);
  }

  options.driver_url = config.driver_url;
  options.executor_id = config.executor_id;
  options.hostname = config.hostname;
  options.cores = config.cores;
  options.app_id = config.app_id;
  options.resource_profile_id = config.resource_profile_id;
  options.log_urls = config.log_urls;
  options.attributes = config.attributes;
  options.connect_tries = config.connect_tries;
  options.connect_retry_delay = Millis(config.connect_retry_delay_ms);
  options.ask_timeout = Millis(config.ask_timeout_ms);
  options.stop_grace = Millis(config.stop_grace_ms);
  // Under systemd (Type=notify): ready once registered, stopping as the exit begins.
  options.on_running = [] { notifySystemd("READY=1\nSTATUS=registered with the driver"); };
  options.on_stopping = [] { notifySystemd("STOPPING=1"); };

  const int decommission_signal = decommissionSignalNumber(config.decommission.signal);
  options.decommission.enabled = config.decommission.enabled;
  options.decommission.check_interval = Millis(config.decommission.check_interval_ms);
  options.decommission.deadline = Millis(config.decommission.deadline_ms);

  // Every thread created from here on inherits this mask; the signal thread takes them.
  // SIGPIPE stays blocked too: a peer that goes away mid-transfer is an error, not a death.
  sigset_t signals = handledSignals(decommission_signal);
  sigaddset(&signals, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  EventLoop loop;
  Backend* backend_ptr = nullptr;
  std::unique_ptr<AgentRuntime> runtime;
  try {
    runtime = std::make_unique<AgentRuntime>(
        config, loop, [&](TaskStatusEvent status) { backend_ptr->onTaskStatus(status); });
  } catch (const PluginLoadFailure& e) {
    log->critical("{}", e.what());
    return toInt(agent::ExitCode::kPluginError);
  }

  options.discover_resources =
      [&runtime, log](const protocol::ResourceProfile& profile,
                      std::map<std::string, protocol::ResourceInfo>& resources) -> std::string {
    try {
      auto found = runtime->discoverResources(profile);
      resources.clear();
      for (const auto& [name, r] : found) {
        log->info("resource {}: [{}] found by {} ({} requested)", name,
                  fmt::join(r.info.addresses, ", "), r.source, r.requested);
        resources[name] = r.info;
      }
      return {};
    } catch (const ResourceError& e) {
      return e.what();
    } catch (const ConfigError& e) {
      return e.what();
    }
  };

  // Blocks: the store under the work directory, its server, and the decommissioner.
  StatusBoard status_board;
  std::unique_ptr<BlockStore> block_store;
  std::unique_ptr<BlockServer> block_server;
  try {
    block_store = std::make_unique<BlockStore>(std::filesystem::path(config.work_dir) / "blocks");
    BlockServerOptions server_options;
    server_options.bind_address = config.bind_address;
    server_options.port = config.block_port;
    server_options.fallback_dir = config.fallback_dir;
    server_options.tls = tls_server;
    if (secret) {
      server_options.verifier = std::make_shared<protocol::auth::RequestVerifier>(*secret);
      runtime->setRequestSigner(protocol::auth::makeRequestSigner(*secret));
    }
    block_server = std::make_unique<BlockServer>(
        server_options, *block_store,
        [&status_board, &block_server, store = block_store.get(), auth = secret.has_value()] {
          nlohmann::json status = status_board.get();
          status["blocks"] = {{"count", store->count()}, {"bytes", store->totalBytes()}};
          status["auth"] = {{"required", auth},
                            {"refused_requests", block_server ? block_server->authRefusals() : 0}};
          return status;
        });
    block_server->start();
  } catch (const std::exception& e) {
    log->critical("{}", e.what());
    return toInt(agent::ExitCode::kConfigError);
  }
  options.block_url = fmt::format("{}://{}:{}", tls_server ? "https" : "http", config.hostname,
                                  block_server->port());
  runtime->attachBlockStore(*block_store, options.block_url);
  if (tls_client) runtime->setTlsClientContext(tls_client);
  std::unique_ptr<PluginDecommissioner> decommissioner;
  if (config.decommission.enabled) {
    try {
      MigrationKinds kinds{config.decommission.shuffle_blocks, config.decommission.rdd_blocks,
                           config.decommission.task_blocks};
      // The plugins report progress to the decommissioner made from them; no pass (and so no
      // report) runs before the pointer is set.
      auto progress_to = std::make_shared<PluginDecommissioner*>(nullptr);
      auto plugins =
          runtime->createMigrationPlugins(config, [progress_to](std::string_view progress) {
            if (*progress_to != nullptr) (*progress_to)->pluginProgress(progress);
          });
      decommissioner = std::make_unique<PluginDecommissioner>(
          loop, *block_store, std::move(plugins), kinds,
          [server = block_server.get()] { server->setAcceptingWrites(false); });
      *progress_to = decommissioner.get();
    } catch (const PluginLoadFailure& e) {
      log->critical("{}", e.what());
      return toInt(agent::ExitCode::kPluginError);
    }
  }

  WebSocketLink link(
      WebSocketLink::Options{config.driver_url, Millis(5000), Millis(10000),
                             static_cast<std::size_t>(config.max_frame_bytes),
                             std::string("dockhand ") + kVersion, secret, tls_client},
      loop);
  SpdlogLevelControl log_control;
  Backend backend(options, link, runtime->executor(), loop, log_control, loop,
                  decommissioner.get());
  backend_ptr = &backend;
  link.setListener(WebSocketLink::Listener{
      [&backend] { backend.onDriverConnected(); },
      [&backend](const std::string& reason, bool retryable) {
        backend.onDriverConnectFailed(reason, retryable);
      },
      [&backend](const protocol::Envelope& frame) { backend.onDriverFrame(frame); },
      [&backend](const std::string& reason) { backend.onDriverDisconnected(reason); },
      [&backend](const std::string& reason) { backend.onDriverAuthFailed(reason); }});

  log->info("dockhand {} starting: executor {} of app {}, {} cores, work dir {}", kVersion,
            config.executor_id, config.app_id, config.cores, config.work_dir);
  if (config.tls.enabled) {
    log->info(
        "TLS on: driver link over wss://, block server over https:// (certificate {}, CA "
        "{}, client certificates {}, host names {})",
        config.tls.certificate_file, config.tls.ca_file,
        config.tls.require_client_certificate ? "required" : "not required",
        config.tls.verify_hostname ? "verified" : "NOT verified");
  }
  if (secret) {
    log->info("authentication on: the cluster secret is read from {}", config.auth_secret_file);
  } else {
    log->info("authentication off: no auth_secret_file (a driver that requires it refuses us)");
  }
  SignalThread signal_thread(loop, backend, decommission_signal);
  std::function<void()> refresh_status = [&] {
    nlohmann::json status = backend.statusJson();
    status.update(runtime->statusJson());
    status_board.set(std::move(status));
    loop.schedule(Millis(250), refresh_status);
  };
  loop.post(refresh_status);
  std::unique_ptr<WorkerWatcher> watcher;
  if (!config.worker_url.empty()) {
    watcher = std::make_unique<WorkerWatcher>(config.worker_url, [&](const std::string& reason) {
      loop.post([&backend, reason] { backend.onWorkerLost(reason); });
    });
    watcher->start();
  }
  loop.post([&backend] { backend.start(); });
  int code = loop.run(toInt(agent::ExitCode::kInternalError));
  link.close();
  if (auto stuck = runtime->stopRunners(Millis(config.stop_grace_ms)); !stuck.empty()) {
    // A runner is still in a call (plugin_call_timeout_ms passed, or stop_grace_ms did):
    // destroying it, or unloading its library, under the call is not safe.
    log->error(
        "task runner(s) '{}' did not return from a call (plugin_call_timeout_ms, then "
        "stop_grace_ms {} ms); exiting without waiting for them",
        fmt::join(stuck, "', '"), config.stop_grace_ms);
    if (decommissioner) decommissioner->stopPass(Millis(config.stop_grace_ms));
    block_server->stop();
    log->info("dockhand exiting with code {}", code);
    spdlog::default_logger()->flush();
    std::_Exit(code);
  }
  if (decommissioner && !decommissioner->stopPass(Millis(config.stop_grace_ms))) {
    // A migration plugin ignored cancel() and is still in migrate(): destroying it (or the
    // store it reads) under the call is not safe, so the process ends without destructors.
    log->error(
        "block migration plugin '{}' did not return from migrate() within {} ms of cancel() "
        "(stop_grace_ms); exiting without waiting for it",
        decommissioner->pluginInCall(), config.stop_grace_ms);
    block_server->stop();
    log->info("dockhand exiting with code {}", code);
    spdlog::default_logger()->flush();
    std::_Exit(code);
  }
  decommissioner.reset();
  block_server->stop();
  log->info("dockhand exiting with code {}", code);
  spdlog::default_logger()->flush();
  return code;
}

}  // namespace dockhand::agent
