// What the dockhand-driver commands share once their options are parsed: the driver config
// as the options complete it, the port file, and the one thread that takes SIGINT/SIGTERM.
//
// Threads: SignalWatcher::blockInThisThread() must run in main() before any other thread
// exists (runCli does it), so that every later thread inherits the blocked mask and the
// signals reach only the watcher's thread, which calls on_signal there.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "dockhand/driver/cli_options.h"
#include "dockhand/driver/driver_config.h"
#include "dockhand/driver/event_log.h"

namespace dockhand::driver {

// SIGINT/SIGTERM, taken by one thread from a signalfd (they are blocked everywhere else). The
// thread sleeps until a signal comes or the watcher is destroyed (an eventfd): no timer.
class SignalWatcher {
 public:
  // Blocks SIGINT/SIGTERM in the calling thread (and so in threads it starts later) and
  // ignores SIGPIPE.
  static void blockInThisThread();

  explicit SignalWatcher(std::function<void(int)> on_signal);
  ~SignalWatcher();
  SignalWatcher(const SignalWatcher&) = delete;
  SignalWatcher& operator=(const SignalWatcher&) = delete;
  // The last signal taken, 0 when none.
  int received() const { return received_.load(); }

 private:
  void loop();

  std::function<void(int)> on_signal_;
  int signal_fd_ = -1;
  int stop_fd_ = -1;  // an eventfd: written once, by the destructor
  std::atomic<int> received_{0};
  std::thread thread_;
};

// Raises this process's soft limit of open files to its hard limit (each connected agent holds
// one descriptor, and the usual soft limit, 1024, is below what a large cluster needs), and
// logs a warning when it is still below what config.server_threads connections need.
void raiseOpenFileLimit(const DriverConfig& config);

// The driver config of --config (defaults without it), --auth-secret-file over its
// auth_secret_file, with the secret and the TLS contexts loaded. Throws ConfigError.
DriverConfig loadConfig(const CliOptions& options);

// The event log of --event-log, opened for appending; null without the option. Throws
// std::runtime_error saying why it cannot be opened.
std::unique_ptr<EventLog> openEventLog(const CliOptions& options);

// Writes the port to `path` atomically (temp file + rename). Throws std::runtime_error.
void writePortFile(const std::string& path, std::uint16_t port);

}  // namespace dockhand::driver
