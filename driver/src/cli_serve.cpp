// dockhand-driver serve: serves agents with no job until SIGINT/SIGTERM.
#include <condition_variable>
#include <mutex>

#include <spdlog/spdlog.h>

#include "dockhand/base/logging.h"
#include "dockhand/driver/cli.h"
#include "dockhand/driver/cli_options.h"
#include "dockhand/driver/cli_setup.h"
#include "dockhand/driver/driver_log.h"
#include "dockhand/driver/driver_service.h"

namespace dockhand::driver {

int serveCommand(const CliOptions& o) {
  DriverConfig config = loadConfig(o);
  setUpDriverLogging(o.log_level.empty() ? "info" : o.log_level, o.log_format);
  raiseOpenFileLimit(config);
  std::mutex mutex;
  std::condition_variable cv;
  bool stop = false;
  SignalWatcher signals([&](int) {
    std::lock_guard lock(mutex);
    stop = true;
    cv.notify_all();
  });
  DriverService service(config, SteadyClock::now, openEventLog(o));
  service.log_task_updates = true;
  service.start(o.listen.host, o.listen.port);
  if (!o.port_file.empty()) writePortFile(o.port_file, service.port());
  logger("driver")->info("{} serving agents on {}://{}:{}/ (authentication {}, TLS {})",
                         driverSoftware(), config.tls.enabled ? "wss" : "ws", o.listen.host,
                         service.port(), config.secret ? "required" : "off",
                         !config.tls.enabled ? "off"
                         : config.tls.require_client_certificate
                             ? "on, client certificates required"
                             : "on");
  {
    std::unique_lock lock(mutex);
    cv.wait(lock, [&] { return stop; });
  }
  logger("driver")->info("signal {}: stopping", signals.received());
  service.stopAgents();
  service.stop();
  return static_cast<int>(DriverExit::kSuccess);
}

}  // namespace dockhand::driver
