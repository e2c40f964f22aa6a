#include "app/agent.h"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include <Poco/URI.h>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include "app/agent_session.h"
#include "app/config_reload.h"
#include "app/readiness.h"
#include "app/signal_thread.h"
#include "app/systemd_notify.h"
#include "blocks/block_fetcher.h"
#include "blocks/own_log.h"
#include "dockhand/base/logging.h"
#include "dockhand/base/thread_name.h"
#include "dockhand/tls/tls.h"
#include "resources/resource_status.h"
#include "resources/resources_file.h"
#include "rpc/worker_watcher.h"

namespace dockhand::agent {

namespace {

StartupError configError(const std::string& what) {
  return {ExitCode::kConfigError, what, /*config_error=*/true};
}

}  // namespace

Agent::Agent(AgentConfig config, ConfigRereader reread)
    : config_(std::move(config)),
      reread_(std::move(reread)),
      settings_(readSettings(config_)),
      signer_(settings_.secret ? protocol::auth::makeRequestSigner(*settings_.secret)
                               : protocol::auth::RequestSigner{}),
      host_(pluginSearchPath(config_), config_.allow_insecure_plugins,
            pluginCallSettings(config_, metrics_), pluginTrust(config_, metrics_)),
      store_(openBlockStore()),
      executor_(loop_, guard_, executorOptions()),
      plugins_(loadAgentPlugins()),
      discoverers_(makeDiscoverers()),
      guard_(executor_, backend_),
      gauges_(*metrics_),
      server_(startBlockServer()),
      decommissioner_(makeDecommissioner()),
      link_(linkOptions(), loop_, backend_),
      backend_(backendOptions(), link_, guard_, loop_, log_control_, loop_, decommissioner_.get()),
      discovery_(discoveryOptions(), guard_, discoverersInOrder(), script_step_,
                 [this] { return loadScriptStep(); }) {
  metrics::registerProcessInfo(*metrics_, "dockhand", DOCKHAND_VERSION, DOCKHAND_BUILD);
}

Agent::~Agent() = default;

std::string Agent::blockUrl() const {
  return fmt::format("{}://{}:{}", settings_.tls_server ? "https" : "http", config_.hostname,
                     server_->port());
}

Agent::Settings Agent::readSettings(const AgentConfig& config) {
  Settings settings;
  try {
    if (!config.auth_secret_file.empty()) {
      settings.secret = protocol::auth::loadSecretFile(config.auth_secret_file);
    }
    if (config.tls.enabled) {
      settings.tls_server = tls::makeContext(config.tls, tls::Role::kServer);
      settings.tls_client = tls::makeContext(config.tls, tls::Role::kClient);
    }
    Poco::URI uri(config.driver_url);
    const char* scheme = config.tls.enabled ? "wss" : "ws";
    if (uri.getScheme() != scheme || uri.getHost().empty() || uri.getPort() == 0) {
      throw configError(fmt::format("driver_url: expected {}://HOST:PORT/", scheme));
    }
    if (!config.worker_url.empty()) parseWorkerUrl(config.worker_url);
    if (!config.resources_file.empty()) {
      settings.given_resources = loadResourcesFile(config.resources_file);
    }
    std::error_code ec;
    std::filesystem::create_directories(config.work_dir, ec);
    if (ec) {
      throw configError(
          fmt::format("work_dir {}: cannot create: {}", config.work_dir, ec.message()));
    }
    // Others may pass through (tasks that run as another user reach their own directory
    // under tasks/) but not list it; what is inside is private to the agent (blocks/ 0700).
    namespace fs = std::filesystem;
    fs::permissions(config.work_dir,
                    fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec, ec);
    if (ec) {
      throw configError(fmt::format("work_dir {}: cannot set its mode to 0711: {}", config.work_dir,
                                    ec.message()));
    }
  } catch (const ConfigError& e) {
    throw configError(e.what());
  } catch (const protocol::auth::SecretError& e) {
    throw configError(std::string("auth_secret_file: ") + e.what());
  } catch (const tls::TlsError& e) {
    throw configError(e.what());
  } catch (const Poco::Exception& e) {
    throw configError("driver_url '" + config.driver_url + "': " + e.displayText());
  } catch (const std::invalid_argument& e) {
    throw configError(std::string("worker_url: ") + e.what());
  }
  return settings;
}

PluginCallbacks Agent::pluginCallbacks() {
  // Every instance reports its tasks' states straight to the executor.
  PluginCallbacks callbacks;
  callbacks.task_status = executor_.runnerReports();
  callbacks.unrecoverable = [this](const std::string& plugin, const std::string& reason) {
    unrecoverable_ = true;
    executor_.leaveRunnersAtStop();
    loop_.post([this, plugin, reason] { backend_.onPluginUnrecoverable(plugin, reason); });
  };
  return callbacks;
}

std::vector<LoadedPlugin> Agent::loadAgentPlugins() {
  auto log = logger("agent");
  std::vector<LoadedPlugin> plugins;
  try {
    std::vector<PluginSpec> specs;
    try {
      specs = pluginSpecs(config_);
    } catch (const ConfigError& e) {
      throw PluginLoadError(std::string("plugin manifest: ") + e.what());
    }
    plugins = loadPlugins(host_, specs, /*create=*/true, pluginCallbacks());
    // The script step is loaded when a request first names a script (AgentDiscovery::discover): an
    // agent whose resources need none never maps it.
    script_step_spec_ = scriptStepSpec(config_, plugins);
  } catch (const PluginLoadError& e) {
    throw StartupError(ExitCode::kPluginError, e.what(), /*config_error=*/false);
  }
  for (LoadedPlugin& plugin : plugins) {
    if (!plugin.ok()) continue;
    const std::uint32_t kinds = plugin.library->descriptor().kinds;
    log->info("{} {} loaded from {} ({})", plugin.library->label(), plugin.library->version(),
              plugin.spec.origin, fmt::join(kindNames(kinds), ", "));
    if ((kinds & DH_KIND_TASK_RUNNER) == 0) continue;
    // A runner-only instance goes to the executor alone, which destroys it (stopping its
    // threads) when it stops; one of several kinds is shared with the other parts.
    auto instance = kinds == DH_KIND_TASK_RUNNER ? std::move(plugin.instance) : plugin.instance;
    executor_.addRunner(plugin.library->name(),
                        std::make_unique<TaskRunnerPlugin>(std::move(instance)));
  }
  return plugins;
}

std::unique_ptr<BlockStore> Agent::openBlockStore() {
  try {
    return std::make_unique<BlockStore>(std::filesystem::path(config_.work_dir) / "blocks");
  } catch (const std::exception& e) {
    throw StartupError(ExitCode::kConfigError, e.what(), /*config_error=*/false);
  }
}

std::unique_ptr<BlockServer> Agent::startBlockServer() {
  try {
    BlockServerOptions options;
    options.bind_address = config_.bind_address;
    options.port = config_.block_port;
    options.fallback_dir = config_.fallback_dir;
    options.tls = settings_.tls_server;
    options.metrics = metrics_.get();
    if (settings_.secret) {
      options.verifier = std::make_shared<protocol::auth::RequestVerifier>(*settings_.secret);
    }
    auto server = std::make_unique<BlockServer>(
        options, *store_, [this] { return servedStatus(); }, [this] { return servedMetrics(); },
        [this] { return notReadyReason(served().snapshot); },
        [this](bool task, std::uint64_t task_id, const std::string& stream) {
          return task ? executor_.openTaskLog(task_id, stream) : openOwnLog(stream);
        });
    server->start();
    return server;
  } catch (const std::exception& e) {
    throw StartupError(ExitCode::kConfigError, e.what(), /*config_error=*/false);
  }
}

std::unique_ptr<PluginDecommissioner> Agent::makeDecommissioner() {
  if (!config_.decommission.enabled) return nullptr;
  const DecommissionConfig& d = config_.decommission;
  try {
    return std::make_unique<PluginDecommissioner>(
        loop_, *store_,
        [this](const MigrationProgressCallback& progress) {
          return makeMigrationPlugins(progress);
        },
        MigrationKinds{d.shuffle_blocks, d.rdd_blocks, d.task_blocks},
        [server = server_.get()] { server->setAcceptingWrites(false); },
        [server = server_.get()] { return server->writesInFlight(); },
        readersCanGet(config_.fallback_dir, kFetchTimeout, signer_, settings_.tls_client));
  } catch (const PluginLoadError& e) {
    throw StartupError(ExitCode::kPluginError, e.what(), /*config_error=*/false);
  }
}

std::vector<std::unique_ptr<BlockMigrationPlugin>> Agent::makeMigrationPlugins(
    const MigrationProgressCallback& progress) {
  auto log = logger("decommission");
  std::vector<std::unique_ptr<BlockMigrationPlugin>> out;
  for (const MigrationEntry& entry : config_.decommission.migration) {
    const std::string& name = entry.name;
    auto plugin_config = migrationPluginConfig(config_, entry, host_.load(name)->configSchema());
    if (!plugin_config) throw PluginLoadError(plugin_config.error().message);
    out.push_back(host_.createBlockMigration(
        name, plugin_config->dump(),
        [log, name, progress](std::string_view report) {
          log->debug("{}: {}", name, report);
          progress(report);
        },
        signer_));
    log->info("block migration plugin {} ready", name);
  }
  return out;
}

PluginExecutorOptions Agent::executorOptions() {
  PluginExecutorOptions options;
  options.work_dir = config_.work_dir;
  options.executor_id = config_.executor_id;
  options.store = store_.get();
  // The block server is built after the executor; the URL is asked once a task has outputs.
  options.block_url = [this] { return blockUrl(); };
  options.signer = signer_;
  options.tls = settings_.tls_client;
  options.keep_task_dirs = static_cast<std::size_t>(config_.keep_task_dirs);
  return options;
}

WebSocketLink::Options Agent::linkOptions() const {
  return WebSocketLink::Options{config_.driver_url,
                                Millis(5000),
                                Millis(10000),
                                static_cast<std::size_t>(config_.max_frame_bytes),
                                std::string("dockhand ") + DOCKHAND_VERSION,
                                settings_.secret,
                                settings_.tls_client,
                                metrics_.get(),
                                /*read_on_core_thread=*/true};
}

BackendOptions Agent::backendOptions() {
  BackendOptions options;
  options.hold_running = true;
  options.driver_url = config_.driver_url;
  options.metrics = metrics_.get();
  options.executor_id = config_.executor_id;
  options.hostname = config_.hostname;
  options.cores = config_.cores;
  options.app_id = config_.app_id;
  options.resource_profile_id = config_.resource_profile_id;
  options.log_urls = config_.log_urls;
  if (options.log_urls.empty()) {
    // Served by the block server (/v1/logs/agent/...): a file when stdout/stderr is one.
    options.log_urls = {{"stdout", blockUrl() + "/v1/logs/agent/stdout"},
                        {"stderr", blockUrl() + "/v1/logs/agent/stderr"}};
  }
  options.task_log_url = blockUrl() + "/v1/tasks/{task_id}/logs/{stream}";
  options.attributes = config_.attributes;
  options.resources = settings_.given_resources;
  options.block_url = blockUrl();
  options.connect_tries = config_.connect_tries;
  options.connect_retry_delay = Millis(config_.connect_retry_delay_ms);
  options.reconnect_timeout = Millis(config_.reconnect_timeout_ms);
  options.held_blocks = [this] {
    std::vector<protocol::BlockInfo> held;
    if (!store_) return held;
    const std::string url = blockUrl();
    for (const auto& meta : store_->list()) {
      held.push_back(describeBlock(meta, config_.executor_id, url));
    }
    return held;
  };
  options.sample_usage = [this] {
    protocol::AgentMetrics figures = usage_.sample();
    if (store_) {
      figures.blocks = store_->count();
      figures.block_bytes = store_->totalBytes();
    }
    return figures;
  };
  options.ask_timeout = Millis(config_.ask_timeout_ms);
  options.stop_grace = Millis(config_.stop_grace_ms);
  options.restart_wait = Millis(config_.restart_wait_ms);
  options.discover_resources = [this](const protocol::ResourceProfile& profile) {
    return discovery_.discover(profile);
  };
  // Under systemd (Type=notify): ready once registered, stopping as the exit begins.
  // The status board is made current here, before LaunchedExecutor goes out, so that a
  // reader whose core-thread refresh does not come in time still sees the agent running.
  options.on_running = [this] {
    recordSession({});
    status_board_.set(statusNow());
    notifySystemd("READY=1\nSTATUS=registered with the driver");
  };
  // A restart in place is a reload to systemd: STOPPING=1 would leave the unit deactivating for
  // good, while the same process goes on and says READY=1 once it resumed.
  options.on_stopping = [](bool restarting_in_place) {
    notifySystemd(restarting_in_place ? "RELOADING=1\nSTATUS=restarting in place" : "STOPPING=1");
  };
  options.resume_after_restart = takeUpSession();
  options.take_back_tasks = [this] { return takeBackTasks(); };
  options.on_handed_over = [this](const std::vector<HandedOverTask>& tasks) {
    recordSession(tasks);
  };
  options.on_resume_refused = [this] {
    if (auto removed = removeSession(sessionPath(config_.work_dir)); !removed) {
      logger("agent")->warn("{}", removed.error().message);
    }
  };
  options.decommission.enabled = config_.decommission.enabled;
  options.decommission.check_interval = Millis(config_.decommission.check_interval_ms);
  options.decommission.deadline = Millis(config_.decommission.deadline_ms);
  return options;
}

void Agent::logStart() const {
  auto log = logger("agent");
  log->info("dockhand {} starting: executor {} of app {}, {} cores, work dir {}", DOCKHAND_VERSION,
            config_.executor_id, config_.app_id, config_.cores, config_.work_dir);
  if (config_.tls.enabled) {
    log->info(
        "TLS on: driver link over wss://, block server over https:// (certificate {}, CA "
        "{}, client certificates {}, host names {})",
        config_.tls.certificate_file, config_.tls.ca_file,
        config_.tls.require_client_certificate ? "required" : "not required",
        config_.tls.verify_hostname ? "verified" : "NOT verified");
  }
  if (settings_.secret) {
    log->info("authentication on: the cluster secret is read from {}", config_.auth_secret_file);
  } else {
    log->info("authentication off: no auth_secret_file (a driver that requires it refuses us)");
  }
}

int Agent::run() {
  logStart();
  SignalHandlers on_signal;
  on_signal.stop = [this](const std::string& reason) {
    loop_.post([this, reason] { backend_.onStopRequested(reason); });
  };
  on_signal.reload = [this] { loop_.post([this] { reload(); }); };
  on_signal.restart = [this] {
    loop_.post([this] { backend_.onRestartRequested("received SIGUSR2"); });
  };
  on_signal.decommission = [this] { loop_.post([this] { backend_.onDecommissionSignal(); }); };
  const SignalThread signal_thread(decommissionSignalNumber(config_.decommission.signal),
                                   std::move(on_signal));
  loop_.post([this] { status_board_.set(statusNow()); });
  std::unique_ptr<WorkerWatcher> watcher;
  if (!config_.worker_url.empty()) {
    watcher = std::make_unique<WorkerWatcher>(config_.worker_url, [this](const std::string& why) {
      loop_.post([this, why] { backend_.onWorkerLost(why); });
    });
    watcher->start();
  }
  loop_.post([this] { backend_.start(); });
  // This thread becomes the core thread: what it sends in a burst leaves in one write.
  link_.batchSendsFromThisThread();
  // Idle: the RUNNING updates held meanwhile go too (BackendOptions::hold_running).
  loop_.setIdleHook([this] {
    backend_.sendHeldStatuses();
    link_.flush();
  });
  const int code = loop_.run(toInt(ExitCode::kInternalError));
  status_board_.close();  // no core thread makes a status any more: serve the last one
  return shutDown(code);
}

int Agent::shutDown(int code) {
  auto log = logger("agent");
  link_.close();
  // The session ends with the process, but for a restart in place (the next process resumes
  // it) and an internal error (as a crash would, it leaves the session to the next start).
  if (code != toInt(ExitCode::kRestartInPlace) && code != toInt(ExitCode::kInternalError)) {
    if (auto removed = removeSession(sessionPath(config_.work_dir)); !removed) {
      log->warn("{}", removed.error().message);
    }
  }
  if (unrecoverable_) {
    // A plugin holds something it cannot give back (a task thread that ignored its kill):
    // destroying it, or unloading its library under that thread, is not safe.
    server_->stop();
    log->error("dockhand exiting with code {} without destroying plugins (a plugin cannot recover)",
               code);
    log->flush();
    std::_Exit(code);
  }
  const Millis grace(config_.stop_grace_ms);
  // Every plugin's calls are stopped, each waited for until `grace` has passed. A plugin still
  // in a call then is left behind, not destroyed (nor its library unloaded) under the call,
  // and the process ends without destructors.
  bool abandon = false;
  if (auto stuck = executor_.stopRunners(grace); !stuck.empty()) {
    log->error(
        "task runner(s) '{}' did not return from a call (plugin_call_timeout_ms, then "
        "stop_grace_ms {} ms); exiting without waiting for them",
        fmt::join(stuck, "', '"), config_.stop_grace_ms);
    abandon = true;
  }
  if (decommissioner_) {
    if (auto stuck = decommissioner_->stopPass(grace); !stuck.empty()) {
      // A migration plugin ignored cancel() and is still in migrate().
      log->error(
          "block migration plugin '{}' did not return from migrate() within {} ms of cancel() "
          "(stop_grace_ms); exiting without waiting for it",
          fmt::join(stuck, "', '"), config_.stop_grace_ms);
      abandon = true;
    }
  }
  const auto deadline = std::chrono::steady_clock::now() + grace;
  for (const LoadedPlugin& plugin : plugins_) {
    if (!plugin.instance || plugin.instance->calls().stop(deadline)) continue;
    log->error("plugin '{}' did not return from {}; exiting without waiting for it",
               plugin.instance->name(),
               plugin.instance->calls().stuck() ? plugin.instance->calls().stuckCall()
                                                : std::string("a call (stop_grace_ms)"));
    abandon = true;
  }
  if (!abandon) decommissioner_.reset();
  server_->stop();
  log->info("dockhand exiting with code {}", code);
  log->flush();
  if (abandon) std::_Exit(code);
  return code;
}

}  // namespace dockhand::agent
