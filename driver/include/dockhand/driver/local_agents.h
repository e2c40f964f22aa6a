// LocalAgents: the agent processes `dockhand-driver run` starts on this machine. Each gets
// its own work directory and log file under one base directory. Only these children are
// ever signalled, by pid.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

namespace dockhand::driver {

struct LocalAgentOptions {
  std::string agent_bin;   // the `dockhand` program
  std::string driver_url;  // ws://127.0.0.1:PORT/ (wss:// with TLS)
  std::string app_id;
  int count = 2;
  int cores = 2;
  std::string base_dir;  // work dirs and logs go here
  std::string log_level = "info";
  std::string log_format;        // passed as --log-format when not empty (else the config's)
  std::string tls_config_file;   // passed as --config first when not empty (the tls section)
  std::string config_file;       // passed as --config when not empty (after tls_config_file)
  std::string auth_secret_file;  // passed as --auth-secret-file when not empty
};

struct LocalAgent {
  std::string id;
  pid_t pid = -1;
  std::string work_dir;
  std::string log_path;
  bool exited = false;
  int wait_status = 0;
};

class LocalAgents {
 public:
  explicit LocalAgents(LocalAgentOptions options);
  // Kills (SIGKILL) and reaps any child still running.
  ~LocalAgents();
  LocalAgents(const LocalAgents&) = delete;
  LocalAgents& operator=(const LocalAgents&) = delete;

  // Starts every agent (posix_spawn). Throws std::runtime_error naming what failed; the
  // agents started before the failure keep running until stop() or destruction.
  void start();
  // Reaps children that exited; returns how many still run.
  std::size_t reap();
  // Waits up to `timeout` for every child to exit; true when all did.
  bool waitAllExited(std::chrono::milliseconds timeout);
  // Waits `grace` for the children to exit, then SIGTERM, then SIGKILL after 2 s more.
  // Returns the ids of the agents that had to be killed.
  std::vector<std::string> stop(std::chrono::milliseconds grace);

  const std::vector<LocalAgent>& agents() const { return agents_; }
  // "exit code 3", "killed by signal 9", or "running".
  static std::string describeExit(const LocalAgent& agent);
  // The last `lines` lines of a file ("" when unreadable).
  static std::string tail(const std::string& path, std::size_t lines);

 private:
  void signalRunning(int signal);

  LocalAgentOptions options_;
  std::vector<LocalAgent> agents_;
};

}  // namespace dockhand::driver
