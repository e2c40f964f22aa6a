// The driver's own configuration (`--config driver.json`). Every key is optional; unknown
// keys are errors. docs/driver.md documents each key.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "dockhand/driver/defaults.h"
#include "dockhand/driver/job_spec.h"
#include "dockhand/protocol/auth.h"
#include "dockhand/protocol/messages.h"
#include "dockhand/tls/tls.h"

namespace dockhand::driver {

// Property names the agent reads from its app config.
inline constexpr const char* kHeartbeatIntervalProperty = "dockhand.heartbeat.interval_ms";
inline constexpr const char* kDriverTimeoutProperty = "dockhand.driver.timeout_ms";

struct DriverConfig {
  // Served to agents in the AppConfig reply (the job file's properties are merged on top).
  std::map<std::string, std::string> properties;
  std::optional<std::string> log_level;
  protocol::ResourceProfile resource_profile;

  // An agent that sends nothing for this long is lost: its tasks are rescheduled.
  long agent_timeout_ms = defaults::kAgentTimeoutMs;
  // An agent that registered with `resumes` is held this long after its connection drops
  // (its tasks and blocks kept, nothing new sent to it) and may come back with ResumeExecutor;
  // past it, it is lost. 0: nobody is held, a dropped agent is lost at once.
  long agent_reconnect_grace_ms = 30000;
  // How often the driver sends Heartbeat to every agent. Also served to agents as
  // dockhand.heartbeat.interval_ms unless `properties` sets that key.
  long heartbeat_interval_ms = 10000;
  // Tries of one job task before the job fails (a job file may override it).
  int max_attempts = defaults::kMaxAttempts;
  // Cores' worth of tasks each agent is sent beyond its free cores. They wait on the agent
  // and start the moment a running task ends, so no slot idles for a round trip to the
  // driver: for many short tasks. 0 (Spark's way): a task is sent only to a free core.
  // defaults::kLaunchAheadAuto ("auto" in the file): each agent's cores' worth, only while
  // the job's tasks prove short (SchedulerOptions::launch_ahead).
  int launch_ahead = defaults::kLaunchAheadAuto;
  // Largest WebSocket frame accepted from an agent.
  std::size_t max_frame_bytes = protocol::kDefaultMaxFrameBytes;
  // The agents the driver expects to hold at once (defaults::kServerThreads): sizes its
  // open-file limit and its pool for HTTP requests and handshakes (at most 16 threads). Agents
  // take no thread: one reactor thread serves every agent connection.
  int server_threads = defaults::kServerThreads;
  // A connection that has not said Hello within this time is closed.
  long hello_timeout_ms = defaults::kHelloTimeoutMs;
  // Frames queued for one agent beyond this count mean it stopped reading: it is dropped.
  std::size_t max_queued_frames = defaults::kMaxQueuedFrames;
  // A library task's result stored as a block (too large for its status update) is fetched
  // from its agent's block server: each network operation of the fetch is bounded by this,
  // and a block above max_result_bytes is refused (the task's attempt fails).
  long result_fetch_timeout_ms = 30000;
  std::uint64_t max_result_bytes = std::uint64_t{1} << 30;
  // The file holding the cluster secret (docs/security.md). Set: every agent must prove it
  // holds the same secret, and the driver proves it to them. Empty: no authentication.
  std::string auth_secret_file;
  // The secret read from auth_secret_file (loadClusterSecret); never read from JSON.
  std::optional<protocol::auth::ClusterSecret> secret;
  // TLS (docs/security.md): on, agents connect with wss:// and the control API is https://.
  tls::TlsConfig tls;
  // The contexts made from `tls` (loadTlsContexts); null with TLS off.
  Poco::Net::Context::Ptr tls_server;
  Poco::Net::Context::Ptr tls_client;  // the CLI's requests to a driver's control API
};

// Parses a driver config object; `source` names the file in errors (ConfigError).
DriverConfig parseDriverConfig(const Json& root, const std::string& source);
DriverConfig loadDriverConfig(const std::string& path);

// Reads config.auth_secret_file (when set) into config.secret. Throws ConfigError saying why
// the file is refused (e.g. readable by group or others).
void loadClusterSecret(DriverConfig& config);

// Checks config.tls's files and makes its server and client contexts (TLS on). Throws
// ConfigError saying which file is unusable and why.
void loadTlsContexts(DriverConfig& config);

// Reads a whole JSON file; ConfigError naming the file when unreadable or not JSON.
Json readJsonFile(const std::string& path);

}  // namespace dockhand::driver
