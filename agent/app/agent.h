// Agent: one running agent, composed. The constructor builds every part in dependency order and
// hands each its collaborators as it is built; run() runs the core thread until the Backend
// exits, then stops the parts in the order that loses nothing.
//
// The task path it wires (two thread hops each way, no part of agent/app on either):
//
//   LaunchTask:   link I/O thread ──post──► core: Backend ─► ResourceGuard ─► PluginExecutor
//                 ──queue──► runner call thread ─► runner plugin's launch()
//   StatusUpdate: plugin thread ─► PluginExecutor::runnerReports() ──post──► core:
//                 ResourceGuard::onTaskStatus ─► Backend::onTaskStatus ─► WebSocketLink::send
//
// Cycles are closed by references to parts built later in the same object (the executor's
// status sink is the guard, the guard's is the Backend, the link's event target is the
// Backend): each part only stores such a reference while it is built and uses it once the core
// thread runs, when every part exists. Members are destroyed in reverse: the Backend first, the
// plugins before the executor their reports go to, the event loop last.
//
// Threads: construct and run() on the main thread. Signals must be blocked in every thread
// before the Agent is built (blockAgentSignals(), app/signal_thread.h), so that only its signal
// thread takes them.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <Poco/Net/Context.h>
#include <nlohmann/json.hpp>

#include "app/agent_config.h"
#include "app/agent_metrics.h"
#include "app/log_setup.h"
#include "app/plugin_loader.h"
#include "app/status_board.h"
#include "app/usage_sampler.h"
#include "blocks/block_server.h"
#include "blocks/block_store.h"
#include "core/backend.h"
#include "core/event_loop.h"
#include "core/exit_codes.h"
#include "decommission/plugin_decommissioner.h"
#include "dockhand/base/result.h"
#include "dockhand/protocol/auth.h"
#include "executor/plugin_executor.h"
#include "plugins/plugin_host.h"
#include "resources/agent_discovery.h"
#include "resources/resource_discovery.h"
#include "resources/resource_guard.h"
#include "rpc/websocket_link.h"

namespace dockhand::agent {

// Why the agent could not start: the line to show and the exit code. A config error is shown
// as "dockhand: config error: <what>" on stderr; any other is logged as critical.
class StartupError : public std::runtime_error {
 public:
  StartupError(ExitCode code, const std::string& what, bool config_error)
      : std::runtime_error(what), code_(code), config_error_(config_error) {}
  ExitCode code() const { return code_; }
  bool configError() const { return config_error_; }

 private:
  ExitCode code_;
  bool config_error_;
};

// Reads the agent's configuration again from the sources it started with, for a reload
// (SIGHUP): the whole configuration, or why it cannot be used.
using ConfigRereader = std::function<Result<AgentConfig>()>;

class Agent {
 public:
  // `config` is complete (defaults applied, --cores resolved). `reread` serves reloads (empty:
  // a reload says it cannot). Throws StartupError.
  explicit Agent(AgentConfig config, ConfigRereader reread = {});
  ~Agent();
  Agent(const Agent&) = delete;
  Agent& operator=(const Agent&) = delete;

  // Runs until the Backend exits; returns the exit code. Ends the process itself (without
  // destructors) when a plugin call never returned, since destroying the plugin under it is
  // not safe. Call once.
  int run();

 private:
  // What start-up reads and checks before it builds any part (a config error otherwise).
  struct Settings {
    std::optional<protocol::auth::ClusterSecret> secret;
    Poco::Net::Context::Ptr tls_server;
    Poco::Net::Context::Ptr tls_client;
    std::map<std::string, protocol::ResourceInfo> given_resources;  // the resources file
  };

  static Settings readSettings(const AgentConfig& config);
  std::vector<LoadedPlugin> loadAgentPlugins();
  PluginCallbacks pluginCallbacks();
  // Loads the script step (script_step_spec_) and adds it to the discoverers: it, or null
  // when there is none or it did not load.
  Discoverer* loadScriptStep();
  std::vector<std::unique_ptr<PluginDiscoverer>> makeDiscoverers();
  std::unique_ptr<BlockStore> openBlockStore();
  std::unique_ptr<BlockServer> startBlockServer();
  std::unique_ptr<PluginDecommissioner> makeDecommissioner();
  std::vector<std::unique_ptr<BlockMigrationPlugin>> makeMigrationPlugins(
      const MigrationProgressCallback& progress);
  PluginExecutorOptions executorOptions();
  WebSocketLink::Options linkOptions() const;
  // <scheme>://<hostname>:<port> of the block server.
  std::string blockUrl() const;
  BackendOptions backendOptions();
  AgentDiscovery::Options discoveryOptions() const;
  std::vector<Discoverer*> discoverersInOrder() const;
  // The agent's state now, as JSON and typed (core thread): what the status board serves.
  AgentStatus statusNow() const;
  // The status board's latest, with the block store's counts (read where it is served).
  AgentStatus served();
  // GET /v1/status's JSON: served() with the server's authentication counts.
  nlohmann::json servedStatus();
  // GET /metrics's text: the gauges set from served()'s snapshot, then the registry's exposition.
  std::string servedMetrics();
  void logStart() const;
  // The orderly end after the loop returned; ends the process at once when a plugin call is
  // still in progress.
  int shutDown(int code);
  // Restarts (agent_restart.cpp). Reads the work directory's session file (agent_session.h):
  // true when this executor's previous process left a session with this driver to resume.
  // Task processes that process left running (it crashed outside a service manager that ends
  // them) are killed first, but for those it handed over to this program (a restart in place).
  bool takeUpSession();
  // BackendOptions::take_back_tasks: the tasks handed over go back to their runners (resources
  // held again); the processes of those that cannot are killed.
  std::vector<HandedOverTask> takeBackTasks();
  // BackendOptions::on_running (no task) and on_handed_over: the driver holds this executor
  // (written at each entry), and the tasks the next program takes back.
  void recordSession(const std::vector<HandedOverTask>& tasks);
  // SIGHUP, on the core thread: reads the configuration again and applies what can change
  // live (config_reload.h).
  void reload();

  AgentConfig config_;
  ConfigRereader reread_;
  // The tasks the previous program handed over (session file), until taken back.
  std::vector<HandedOverTask> handed_over_;
  Settings settings_;
  protocol::auth::RequestSigner signer_;
  // The agent's metrics (GET /metrics): every part that counts is handed it. Shared, because
  // a plugin call that never returns may count after the agent is gone (plugin_calls.h).
  std::shared_ptr<metrics::Registry> metrics_ = std::make_shared<metrics::Registry>();
  EventLoop loop_;
  // Set (from any plugin thread) once a plugin asked the agent to end (dh_host.unrecoverable):
  // the exit then leaves every plugin as it is, destroy() uncalled.
  std::atomic<bool> unrecoverable_{false};
  SpdlogLevelControl log_control_;
  PluginHost host_;
  std::unique_ptr<BlockStore> store_;  // before executor_, which ingests into it
  PluginExecutor executor_;
  // The script step to load when a request first names a discovery script (scriptStepSpec);
  // empty once tried, or when there is none. Declared before plugins_: loadAgentPlugins()
  // sets it.
  std::optional<PluginSpec> script_step_spec_;
  std::vector<LoadedPlugin> plugins_;
  // The script plugin as the chain's last step (isScriptStep); null until loaded. One of
  // discoverers_, set by loadScriptStep() (or makeDiscoverers() for a listed one).
  PluginDiscoverer* script_step_ = nullptr;
  std::vector<std::unique_ptr<PluginDiscoverer>> discoverers_;
  ResourceGuard guard_;
  StatusBoard status_board_;
  AgentGauges gauges_;
  UsageSampler usage_;  // core thread: the heartbeats' figures
  std::unique_ptr<BlockServer> server_;
  std::unique_ptr<PluginDecommissioner> decommissioner_;
  WebSocketLink link_;
  Backend backend_;
  AgentDiscovery discovery_;  // BackendOptions::discover_resources
};

}  // namespace dockhand::agent
