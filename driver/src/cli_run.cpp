// dockhand-driver run: one job on agents started here (LocalAgents), served by a
// DriverService in this process; progress on a terminal, a line per task and a summary at
// the end.
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <Poco/Exception.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "dockhand/base/logging.h"
#include "dockhand/driver/cli.h"
#include "dockhand/driver/cli_options.h"
#include "dockhand/driver/cli_setup.h"
#include "dockhand/driver/driver_log.h"
#include "dockhand/driver/driver_service.h"
#include "dockhand/driver/job_spec.h"
#include "dockhand/driver/local_agents.h"
#include "dockhand/driver/report.h"
#include "dockhand/driver/results_dir.h"

namespace dockhand::driver {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;
using std::chrono::seconds;

// How long `run` lets a decommission under way finish once the job has ended.
constexpr seconds kDecommissionGraceAtEnd{10};
// How long the report waits for the tasks a failed job killed to say how they ended: the
// built-in runners' longest default kill bound (the library runner's kill_timeout_ms, 10 s)
// and a little for the link.
constexpr seconds kKillAnswerWait{12};

std::string defaultAgentBin() {
  std::error_code ec;
  fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return "dockhand";
  return (self.parent_path() / "dockhand").string();
}

class TempDir {
 public:
  TempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string templ = fmt::format("{}/dockhand-run-XXXXXX", base && *base ? base : "/tmp");
    if (::mkdtemp(templ.data()) == nullptr) {
      throw std::runtime_error(
          fmt::format("cannot create a temp dir from {}: {}", templ, std::strerror(errno)));
    }
    path_ = templ;
  }
  ~TempDir() {
    if (keep_) return;
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  void keep() { keep_ = true; }

 private:
  std::string path_;
  bool keep_ = false;
};

void printAgentLogs(const LocalAgents& agents) {
  for (const auto& agent : agents.agents()) {
    std::string tail = LocalAgents::tail(agent.log_path, 15);
    std::cerr << fmt::format("--- {} ({}), last lines of {}:\n{}", agent.id,
                             LocalAgents::describeExit(agent), agent.log_path,
                             tail.empty() ? "(empty)\n" : tail);
  }
}

}  // namespace

int runCommand(const CliOptions& o) {
  JobSpec job;
  DriverConfig config;
  config = loadConfig(o);
  job = loadJobFile(o.job_file);
  setUpDriverLogging(o.log_level.empty() ? "warn" : o.log_level, o.log_format);
  raiseOpenFileLimit(config);
  auto log = logger("driver");
  // The agents learn each task's share of a resource from the profile the driver serves;
  // without the driver config naming it, it is what the job's tasks ask for.
  for (const std::string& warning : completeTaskResources(job, config.resource_profile)) {
    log->warn("{}", warning);
  }

  const std::string agent_bin = o.agent_bin.empty() ? defaultAgentBin() : o.agent_bin;
  if (o.local_agents > 0 && ::access(agent_bin.c_str(), X_OK) != 0) {
    std::cerr << fmt::format(
        "dockhand-driver: the agent program {} is not executable ({}); build it or pass "
        "--agent-bin\n",
        agent_bin, std::strerror(errno));
    return static_cast<int>(DriverExit::kConfigError);
  }
  const auto min_agents = static_cast<std::size_t>(o.min_agents.value_or(o.local_agents));

  std::atomic<bool> interrupted{false};
  std::unique_ptr<DriverService> service_holder =
      std::make_unique<DriverService>(config, SteadyClock::now, openEventLog(o));
  DriverService& service = *service_holder;
  SignalWatcher signals([&](int) {
    interrupted = true;
    service.cancel("interrupted by a signal");
  });

  service.addAppProperties(job.properties);
  try {
    service.start(o.listen.host, o.listen.port);
  } catch (const Poco::Exception& e) {
    std::cerr << fmt::format("dockhand-driver: cannot listen on {}:{}: {}\n", o.listen.host,
                             o.listen.port, e.displayText());
    return static_cast<int>(DriverExit::kJobFailed);
  }
  if (!o.port_file.empty()) writePortFile(o.port_file, service.port());

  TempDir work;
  if (o.keep_work_dirs) work.keep();
  const std::string connect_host =
      (o.listen.host == "0.0.0.0" || o.listen.host == "::") ? "127.0.0.1" : o.listen.host;
  LocalAgentOptions agent_options;
  agent_options.agent_bin = agent_bin;
  agent_options.driver_url =
      fmt::format("{}://{}:{}/", config.tls.enabled ? "wss" : "ws", connect_host, service.port());
  agent_options.app_id = fmt::format("{}-{}-{}", job.name, std::time(nullptr), ::getpid());
  agent_options.count = o.local_agents;
  agent_options.cores = o.cores;
  agent_options.base_dir = work.path();
  // The driver's --log-format goes to its agents too (one format in one run's logs); without it
  // they follow --agent-config.
  if (o.log_format_given) agent_options.log_format = o.log_format;
  agent_options.config_file = o.agent_config.empty() ? "" : fs::absolute(o.agent_config).string();
  agent_options.auth_secret_file =
      config.auth_secret_file.empty() ? "" : fs::absolute(config.auth_secret_file).string();
  if (config.tls.enabled) {
    // The local agents use the driver's own TLS files: its certificate names this machine
    // (they connect to it, and to each other, on 127.0.0.1), its CA verifies both ends.
    tls::TlsConfig agent_tls = config.tls;
    for (std::string* file :
         {&agent_tls.certificate_file, &agent_tls.private_key_file, &agent_tls.ca_file}) {
      if (!file->empty()) *file = fs::absolute(*file).string();
    }
    agent_options.tls_config_file = (fs::path(work.path()) / "agent-tls.json").string();
    std::ofstream out(agent_options.tls_config_file, std::ios::trunc);
    out << Json{{"tls", tls::tlsConfigToJson(agent_tls)}}.dump(2) << "\n";
    out.close();
    if (!out) {
      std::cerr << fmt::format("dockhand-driver: cannot write {}\n", agent_options.tls_config_file);
      return static_cast<int>(DriverExit::kJobFailed);
    }
  }
  LocalAgents agents(agent_options);

  const auto started = SteadyClock::now();
  const bool has_deadline = o.timeout_s.has_value();
  const TimePoint deadline = has_deadline ? started + seconds(*o.timeout_s) : TimePoint::max();
  auto finish = [&](int code, bool show_logs) {
    if (!interrupted && o.linger_s > 0) {
      // The report is out; the status page, /metrics and the control API stay up a while.
      log->info("lingering {} s before stopping the agents (--linger)", o.linger_s);
      const auto until = SteadyClock::now() + seconds(o.linger_s);
      while (!interrupted && SteadyClock::now() < until) {
        std::this_thread::sleep_for(
            std::min<SteadyClock::duration>(milliseconds(100), until - SteadyClock::now()));
      }
    }
    if (!interrupted) {
      // A decommission under way is let finish (its blocks move, the agent leaves on its
      // own) before the rest are stopped; bounded, as it may be stuck.
      const std::size_t left = service.waitForDecommissions(
          SteadyClock::now() +
          std::chrono::duration_cast<SteadyClock::duration>(kDecommissionGraceAtEnd));
      if (left > 0) {
        log->warn("{} agent(s) still decommissioning after {} s; stopping them", left,
                  kDecommissionGraceAtEnd.count());
      }
    }
    service.stopAgents();
    std::vector<std::string> killed = agents.stop(seconds(5));
    if (!killed.empty()) {
      log->warn("killed {} agent(s) that did not stop within 5 s: {}", killed.size(),
                fmt::join(killed, ", "));
    }
    service.stop();
    if (show_logs && o.local_agents > 0) printAgentLogs(agents);
    if (o.keep_work_dirs) std::cerr << "dockhand-driver: work dirs kept in " << work.path() << "\n";
    return code;
  };

  try {
    agents.start();
  } catch (const std::exception& e) {
    std::cerr << "dockhand-driver: " << e.what() << "\n";
    return finish(static_cast<int>(DriverExit::kJobFailed), true);
  }

  // Wait (bounded) for the agents to register.
  const auto registration_deadline = std::min(started + seconds(30), deadline);
  std::size_t registered = 0;
  while (true) {
    registered = service.waitForAgents(
        min_agents, std::min(registration_deadline, SteadyClock::now() + milliseconds(100)));
    if (registered >= min_agents || interrupted) break;
    if (o.local_agents > 0 && agents.reap() == 0) break;
    if (SteadyClock::now() >= registration_deadline) break;
  }
  if (interrupted) return finish(static_cast<int>(DriverExit::kInterrupted), false);
  if (registered < min_agents) {
    std::cerr << fmt::format(
        "dockhand-driver: only {} of {} agent(s) registered within {} s; job {} not started\n",
        registered, min_agents,
        std::chrono::duration_cast<seconds>(registration_deadline - started).count(), job.name);
    return finish(static_cast<int>(DriverExit::kJobFailed), true);
  }

  const bool tty = !o.quiet && ::isatty(STDOUT_FILENO) == 1;
  const std::string job_name = job.name;
  const auto job_started = SteadyClock::now();
  service.submit(std::move(job));
  bool warned_unschedulable = false;
  std::size_t progress_width = 0;
  // When to decommission --decommission's agent; max(): not (or no longer) to do.
  TimePoint decommission_at = o.decommission_id.empty()
                                  ? TimePoint::max()
                                  : job_started + milliseconds(o.decommission_after_ms);
  for (;;) {
    auto slice = SteadyClock::now() + milliseconds(tty ? 200 : 500);
    slice = std::min({slice, deadline, decommission_at});
    if (SteadyClock::now() >= decommission_at) {
      decommission_at = TimePoint::max();
      if (service.decommission(o.decommission_id, "--decommission")) {
        log->info("asked agent '{}' to decommission (--decommission)", o.decommission_id);
      } else {
        log->warn("--decommission {}: no agent of that id is registered", o.decommission_id);
      }
    }
    if (service.waitForJob(slice) != JobState::kRunning) break;
    if (has_deadline && SteadyClock::now() >= deadline) {
      service.cancel(fmt::format("timed out after {} s (--timeout)", *o.timeout_s));
      break;
    }
    if (o.local_agents > 0 && agents.reap() == 0 && o.min_agents.value_or(1) > 0) {
      service.cancel("every local agent exited");
      break;
    }
    std::optional<std::string> stuck;
    Progress progress;
    service.inspect([&](const Scheduler& s) {
      stuck = s.unschedulableReason();
      progress = s.progress();
    });
    if (stuck && !warned_unschedulable) {
      warned_unschedulable = true;
      if (o.local_agents > 0 && !o.min_agents) {
        service.cancel(*stuck);
        break;
      }
      log->warn("{}; waiting for a larger agent to register", *stuck);
    }
    if (tty) {
      std::string line = formatProgress(job_name, progress);
      progress_width = std::max(progress_width, line.size());
      std::cout << "\r" << fmt::format("{:<{}}", line, progress_width) << std::flush;
    }
  }
  const auto wall = std::chrono::duration_cast<milliseconds>(SteadyClock::now() - job_started);
  if (tty && progress_width > 0) {
    std::cout << "\r" << std::string(progress_width, ' ') << "\r" << std::flush;
  }
  if (!interrupted) {
    // A killed task's line shows its reason and its time once its agent says it has ended.
    const std::size_t unanswered = service.waitForKills(SteadyClock::now() + kKillAnswerWait);
    if (unanswered > 0) {
      log->warn("{} killed task(s) had not said how they ended {} s after the job ended",
                unanswered, kKillAnswerWait.count());
    }
  }

  JobState state = JobState::kNone;
  std::string printed;
  std::vector<TaskRecord> ended_tasks;  // for --results-dir, written outside the service's lock
  service.endJob(wall, [&](const JobReportView& report) {
    state = report.state;
    printed = formatReport(report, o.quiet);
    if (!o.results_dir.empty()) ended_tasks = report.tasks;
  });
  std::cout << printed << std::flush;
  // An update for a task that is not running on its sender (a second terminal status, or one
  // of an agent already dropped) is ignored; count them so that a loss or a duplicate shows.
  const std::uint64_t stray = service.counters().stray_updates;
  log->log(stray > 0 ? spdlog::level::warn : spdlog::level::info,
           "{} stray status update(s) ignored (for a task not running on its sender)", stray);

  std::optional<Result<std::size_t>> results_written;
  if (!o.results_dir.empty()) results_written = writeResultsDir(o.results_dir, ended_tasks);
  if (results_written && !results_written->ok()) {
    std::cerr << "dockhand-driver: --results-dir: " << results_written->error().message << "\n";
    if (!interrupted) return finish(static_cast<int>(DriverExit::kJobFailed), false);
  } else if (results_written) {
    log->info("{} task value(s) and results.json written to {}", results_written->value(),
              o.results_dir);
  }
  if (interrupted) return finish(static_cast<int>(DriverExit::kInterrupted), false);
  if (state == JobState::kSucceeded) return finish(static_cast<int>(DriverExit::kSuccess), false);
  return finish(static_cast<int>(DriverExit::kJobFailed), true);
}

}  // namespace dockhand::driver
