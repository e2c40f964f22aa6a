#include "dockhand/driver/cli.h"

#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <Poco/Exception.h>
#include <Poco/Net/HTTPClientSession.h>
#include <Poco/Net/HTTPRequest.h>
#include <Poco/Net/HTTPResponse.h>
#include <Poco/Net/HTTPSClientSession.h>
#include <Poco/URI.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "dockhand/driver/driver_config.h"
#include "dockhand/driver/driver_log.h"
#include "dockhand/driver/driver_service.h"
#include "dockhand/driver/job_spec.h"
#include "dockhand/driver/local_agents.h"
#include "dockhand/driver/report.h"
#include "dockhand/protocol/auth.h"

namespace dockhand::driver {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr const char* kUsage = R"(usage: dockhand-driver [--help] [--version] <command> [options]

commands:
  run JOB.json [options]   run a job on local agents (started here) and report each task
  serve [options]          serve agents with no job until SIGINT/SIGTERM
  decommission EXECUTOR_ID --driver HOST:PORT [--reason TEXT] [--config FILE]
               [--auth-secret-file F]
                           ask a running driver to decommission one of its agents (over
                           https:// when FILE's tls section is on; signed with the cluster
                           secret when the driver authenticates)

run options:
  --local-agents N     agents to start on this machine (default 2; 0: only external agents)
  --cores C            cores each local agent offers (default 2)
  --min-agents M       registrations to wait for before the job starts (default N)
  --agent-bin PATH     the agent program (default: dockhand next to this program)
  --listen HOST:PORT   where agents connect (default 127.0.0.1:0, an ephemeral port)
  --port-file F        write the bound port to F once listening
  --config FILE        driver config (JSON; see docs/driver.md)
  --timeout SECONDS    fail the job if it has not ended by then (default: no limit)
  --agent-config FILE  config file passed to every local agent (dockhand --config FILE)
  --decommission ID    decommission agent ID while the job runs ...
  --decommission-after-ms N  ... N ms after the job starts (default 0)
  --keep-work-dirs     keep the agents' work dirs and logs (their path is printed)
  --quiet              print only the summary line
  --log-level LEVEL    driver log level on stderr (default warn)
  --auth-secret-file F require agents to prove the cluster secret in F (mode 0600; also
                       given to the local agents); overrides the config's auth_secret_file

serve options:
  --listen HOST:PORT, --port-file F, --config FILE, --log-level LEVEL (default info),
  --auth-secret-file F

exit codes:
  0    the job succeeded (serve: stopped by a signal; decommission: accepted)
  1    the job failed, timed out, or could not run (agents did not register);
       decommission: no such executor, or the driver cannot be reached
  2    a config or job file is invalid, or the agent program is missing
  64   unknown option or bad option value
  130  run: interrupted by SIGINT/SIGTERM
)";

// How long `run` lets a decommission under way finish once the job has ended.
constexpr seconds kDecommissionGraceAtEnd{10};

class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// SIGINT/SIGTERM, taken by one thread with sigtimedwait (they are blocked everywhere else).
class SignalWatcher {
 public:
  static void blockInThisThread() {
    sigset_t set = signals();
    pthread_sigmask(SIG_BLOCK, &set, nullptr);
    ::signal(SIGPIPE, SIG_IGN);
  }

  explicit SignalWatcher(std::function<void(int)> on_signal)
      : on_signal_(std::move(on_signal)), thread_([this] { loop(); }) {}
  ~SignalWatcher() {
    stop_ = true;
    thread_.join();
  }
  SignalWatcher(const SignalWatcher&) = delete;
  SignalWatcher& operator=(const SignalWatcher&) = delete;
  int received() const { return received_.load(); }

 private:
  static sigset_t signals() {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    return set;
  }
  void loop() {
    sigset_t set = signals();
    timespec wait{0, 200 * 1000 * 1000};
    while (!stop_.load()) {
      int sig = sigtimedwait(&set, nullptr, &wait);
      if (sig > 0) {
        received_.store(sig);
        on_signal_(sig);
      }
    }
  }

  std::function<void(int)> on_signal_;
  std::atomic<bool> stop_{false};
  std::atomic<int> received_{0};
  std::thread thread_;
};

struct Listen {
  std::string host = "127.0.0.1";
  std::uint16_t port = 0;
};

Listen parseListen(const std::string& text) {
  auto colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0) {
    throw UsageError(fmt::format("--listen expects HOST:PORT, got '{}'", text));
  }
  Listen l;
  l.host = text.substr(0, colon);
  if (l.host.size() > 2 && l.host.front() == '[' && l.host.back() == ']') {
    l.host = l.host.substr(1, l.host.size() - 2);
  }
  const std::string port = text.substr(colon + 1);
  char* end = nullptr;
  long value = std::strtol(port.c_str(), &end, 10);
  if (port.empty() || *end != '\0' || value < 0 || value > 65535) {
    throw UsageError(fmt::format("--listen: '{}' is not a port (0-65535)", port));
  }
  l.port = static_cast<std::uint16_t>(value);
  return l;
}

long parseNumber(const std::string& option, const std::string& text, long min, long max) {
  char* end = nullptr;
  errno = 0;
  long value = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno != 0 || value < min || value > max) {
    throw UsageError(
        fmt::format("{} expects a whole number in [{}, {}], got '{}'", option, min, max, text));
  }
  return value;
}

struct Options {
  std::string command;
  std::string job_file;
  int local_agents = 2;
  int cores = 2;
  std::optional<int> min_agents;
  std::string agent_bin;
  Listen listen;
  std::string port_file;
  std::string config_file;
  std::optional<long> timeout_s;
  bool keep_work_dirs = false;
  bool quiet = false;
  std::string log_level;
  std::string agent_config;
  std::string auth_secret_file;
  std::string decommission_id;  // run: agent to decommission; decommission: the executor
  long decommission_after_ms = 0;
  std::string driver;  // decommission: HOST:PORT
  std::string reason = "dockhand-driver decommission";
  bool help = false;
  bool version = false;
};

Options parseArgs(int argc, char** argv) {
  Options o;
  std::vector<std::string> args(argv + 1, argv + argc);
  std::vector<std::string> positional;
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string arg = args[i];
    std::optional<std::string> inline_value;
    if (arg.rfind("--", 0) == 0) {
      if (auto eq = arg.find('='); eq != std::string::npos) {
        inline_value = arg.substr(eq + 1);
        arg = arg.substr(0, eq);
      }
    }
    auto value = [&]() -> std::string {
      if (inline_value) return *inline_value;
      if (i + 1 >= args.size()) throw UsageError(fmt::format("{} needs a value", arg));
      return args[++i];
    };
    auto flag = [&] {
      if (inline_value) throw UsageError(fmt::format("{} takes no value", arg));
    };
    if (arg == "--help" || arg == "-h") {
      o.help = true;
    } else if (arg == "--version") {
      o.version = true;
    } else if (arg == "--local-agents") {
      o.local_agents = static_cast<int>(parseNumber(arg, value(), 0, 256));
    } else if (arg == "--cores") {
      o.cores = static_cast<int>(parseNumber(arg, value(), 1, 4096));
    } else if (arg == "--min-agents") {
      o.min_agents = static_cast<int>(parseNumber(arg, value(), 0, 100000));
    } else if (arg == "--agent-bin") {
      o.agent_bin = value();
    } else if (arg == "--listen") {
      o.listen = parseListen(value());
    } else if (arg == "--port-file") {
      o.port_file = value();
    } else if (arg == "--config") {
      o.config_file = value();
    } else if (arg == "--timeout") {
      o.timeout_s = parseNumber(arg, value(), 1, 100L * 365 * 86400);
    } else if (arg == "--agent-config") {
      o.agent_config = value();
    } else if (arg == "--auth-secret-file") {
      o.auth_secret_file = value();
      if (o.auth_secret_file.empty()) throw UsageError("--auth-secret-file needs a file");
    } else if (arg == "--decommission") {
      o.decommission_id = value();
      if (o.decommission_id.empty()) throw UsageError("--decommission needs an executor id");
    } else if (arg == "--decommission-after-ms") {
      o.decommission_after_ms = parseNumber(arg, value(), 0, 365L * 86400 * 1000);
    } else if (arg == "--driver") {
      o.driver = value();
    } else if (arg == "--reason") {
      o.reason = value();
    } else if (arg == "--keep-work-dirs") {
      flag();
      o.keep_work_dirs = true;
    } else if (arg == "--quiet" || arg == "-q") {
      flag();
      o.quiet = true;
    } else if (arg == "--log-level") {
      o.log_level = value();
      if (spdlog::level::from_str(o.log_level) == spdlog::level::off && o.log_level != "off") {
        throw UsageError(fmt::format("--log-level: unknown level '{}'", o.log_level));
      }
    } else if (arg.size() > 1 && arg[0] == '-') {
      throw UsageError(fmt::format("unknown option '{}'", arg));
    } else {
      positional.push_back(arg);
    }
  }
  if (o.help || o.version) return o;
  if (positional.empty()) throw UsageError("missing command (run, serve or decommission)");
  o.command = positional[0];
  auto rejectOptions = [&](std::initializer_list<const char*> options, const char* owner) {
    for (const auto& arg : args) {
      for (const char* option : options) {
        if (arg == option || arg.rfind(std::string(option) + "=", 0) == 0) {
          throw UsageError(fmt::format("{} is an option of {}, not {}", option, owner, o.command));
        }
      }
    }
  };
  if (o.command == "run") {
    if (positional.size() != 2) throw UsageError("run takes exactly one job file");
    o.job_file = positional[1];
    rejectOptions({"--driver", "--reason"}, "decommission");
    if (o.decommission_after_ms > 0 && o.decommission_id.empty()) {
      throw UsageError("--decommission-after-ms needs --decommission EXECUTOR_ID");
    }
  } else if (o.command == "serve") {
    if (positional.size() != 1) throw UsageError("serve takes no arguments");
    rejectOptions({"--local-agents", "--cores", "--min-agents", "--agent-bin", "--timeout",
                   "--keep-work-dirs", "--quiet", "--agent-config", "--decommission",
                   "--decommission-after-ms"},
                  "run");
    rejectOptions({"--driver", "--reason"}, "decommission");
  } else if (o.command == "decommission") {
    if (positional.size() != 2) throw UsageError("decommission takes exactly one executor id");
    o.decommission_id = positional[1];
    if (o.driver.empty()) throw UsageError("decommission needs --driver HOST:PORT");
    parseListen(o.driver);  // validates HOST:PORT
    rejectOptions({"--local-agents", "--cores", "--min-agents", "--agent-bin", "--timeout",
                   "--keep-work-dirs", "--agent-config", "--decommission",
                   "--decommission-after-ms", "--listen", "--port-file"},
                  "run or serve");
  } else {
    throw UsageError(
        fmt::format("unknown command '{}' (expected run, serve or decommission)", o.command));
  }
  return o;
}

// Writes the port to `path` atomically (temp file + rename).
void writePortFile(const std::string& path, std::uint16_t port) {
  const std::string tmp = fmt::format("{}.tmp.{}", path, ::getpid());
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << port << "\n";
    out.close();
    if (!out) throw std::runtime_error(fmt::format("cannot write port file {}", tmp));
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) {
    fs::remove(tmp, ec);
    throw std::runtime_error(fmt::format("cannot write port file {}: {}", path, ec.message()));
  }
}

std::string defaultAgentBin() {
  std::error_code ec;
  fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return "dockhand";
  return (self.parent_path() / "dockhand").string();
}

DriverConfig loadConfig(const Options& o) {
  DriverConfig config = o.config_file.empty() ? DriverConfig{} : loadDriverConfig(o.config_file);
  if (!o.auth_secret_file.empty()) config.auth_secret_file = o.auth_secret_file;
  loadClusterSecret(config);
  loadTlsContexts(config);
  return config;
}

// ---- serve --------------------------------------------------------------------------------

int serve(const Options& o) {
  DriverConfig config = loadConfig(o);
  setUpDriverLogging(o.log_level.empty() ? "info" : o.log_level);
  std::mutex mutex;
  std::condition_variable cv;
  bool stop = false;
  SignalWatcher signals([&](int) {
    std::lock_guard lock(mutex);
    stop = true;
    cv.notify_all();
  });
  DriverService service(config);
  service.log_task_updates = true;
  service.start(o.listen.host, o.listen.port);
  if (!o.port_file.empty()) writePortFile(o.port_file, service.port());
  driverLogger()->info("{} serving agents on {}://{}:{}/ (authentication {}, TLS {})",
                       driverSoftware(), config.tls.enabled ? "wss" : "ws", o.listen.host,
                       service.port(), config.secret ? "required" : "off",
                       !config.tls.enabled                     ? "off"
                       : config.tls.require_client_certificate ? "on, client certificates required"
                                                               : "on");
  {
    std::unique_lock lock(mutex);
    cv.wait(lock, [&] { return stop; });
  }
  driverLogger()->info("signal {}: stopping", signals.received());
  service.stopAgents();
  service.stop();
  return static_cast<int>(DriverExit::kSuccess);
}

// ---- decommission -------------------------------------------------------------------------

// Percent-encodes what may not stand in a URL path segment as is.
std::string encodePathSegment(const std::string& text) {
  std::string out;
  Poco::URI::encode(text, "/?#%", out);
  return out;
}

int decommissionCommand(const Options& o) {
  const Listen driver = parseListen(o.driver);
  auto route = [](const std::string& id) {
    return fmt::format("/v1/executors/{}/decommission", id);
  };
  const std::string path = route(encodePathSegment(o.decommission_id));
  // A driver with TLS on serves its control API over https://: the config's tls section says
  // which CA to trust (and which certificate to present when it requires one). A driver with
  // a cluster secret takes only requests signed with it (auth_secret_file or the option).
  const DriverConfig config = loadConfig(o);
  try {
    std::unique_ptr<Poco::Net::HTTPClientSession> session_ptr;
    if (config.tls_client) {
      session_ptr = std::make_unique<Poco::Net::HTTPSClientSession>(driver.host, driver.port,
                                                                    config.tls_client);
    } else {
      session_ptr = std::make_unique<Poco::Net::HTTPClientSession>(driver.host, driver.port);
    }
    Poco::Net::HTTPClientSession& session = *session_ptr;
    session.setTimeout(Poco::Timespan(10, 0));
    Poco::Net::HTTPRequest request(Poco::Net::HTTPRequest::HTTP_POST, path,
                                   Poco::Net::HTTPMessage::HTTP_1_1);
    const std::string body = Json{{"reason", o.reason}}.dump();
    request.setContentType("application/json");
    request.setContentLength64(static_cast<Poco::Int64>(body.size()));
    if (config.secret) {
      // The server checks the path as it decodes it: the id as given, not percent-encoded.
      request.set("Authorization", protocol::auth::makeRequestSigner(*config.secret)(
                                       "POST", route(o.decommission_id), body));
    }
    session.sendRequest(request) << body;
    Poco::Net::HTTPResponse response;
    std::istream& in = session.receiveResponse(response);
    std::string answer{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    if (response.getStatus() == Poco::Net::HTTPResponse::HTTP_OK) {
      std::cout << fmt::format("executor {} is decommissioning\n", o.decommission_id);
      return static_cast<int>(DriverExit::kSuccess);
    }
    Json parsed = Json::parse(answer, nullptr, /*allow_exceptions=*/false);
    std::string why = parsed.is_object() && parsed.contains("error") && parsed["error"].is_string()
                          ? parsed["error"].get<std::string>()
                          : answer;
    std::cerr << fmt::format("dockhand-driver: the driver at {} refused: HTTP {}: {}\n", o.driver,
                             static_cast<int>(response.getStatus()), why);
  } catch (const Poco::Exception& e) {
    std::cerr << fmt::format("dockhand-driver: cannot reach the driver at {}: {}\n", o.driver,
                             e.displayText());
  }
  return static_cast<int>(DriverExit::kJobFailed);
}

// ---- run ----------------------------------------------------------------------------------

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

int run(const Options& o) {
  JobSpec job;
  DriverConfig config;
  config = loadConfig(o);
  job = loadJobFile(o.job_file);
  setUpDriverLogging(o.log_level.empty() ? "warn" : o.log_level);
  const auto& log = driverLogger();
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
  const std::size_t min_agents = static_cast<std::size_t>(o.min_agents.value_or(o.local_agents));

  std::atomic<bool> interrupted{false};
  std::unique_ptr<DriverService> service_holder = std::make_unique<DriverService>(config);
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

  JobState state = JobState::kNone;
  service.inspect([&](const Scheduler& s) {
    state = s.jobState();
    const auto& tasks = s.tasks();
    if (!o.quiet) {
      std::size_t width = 4;
      for (const auto& t : tasks) width = std::max(width, t.spec.name.size());
      std::string out;
      for (const auto& t : tasks) out += formatTaskLine(t, width) + "\n";
      std::cout << out;
    }
    std::optional<SumResult> sum;
    if (s.job().aggregate == Aggregate::kSum) sum = sumStdout(tasks);
    std::cout << formatSummary(s.job(), state, s.progress(), s.failureReason(), wall, sum)
              << std::endl;
  });
  // An update for a task that is not running on its sender (a second terminal status, or one
  // of an agent already dropped) is ignored; count them so that a loss or a duplicate shows.
  const std::uint64_t stray = service.counters().stray_updates;
  log->log(stray > 0 ? spdlog::level::warn : spdlog::level::info,
           "{} stray status update(s) ignored (for a task not running on its sender)", stray);

  if (interrupted) return finish(static_cast<int>(DriverExit::kInterrupted), false);
  if (state == JobState::kSucceeded) return finish(static_cast<int>(DriverExit::kSuccess), false);
  return finish(static_cast<int>(DriverExit::kJobFailed), true);
}

}  // namespace

int runCli(int argc, char** argv) {
  SignalWatcher::blockInThisThread();
  Options options;
  try {
    options = parseArgs(argc, argv);
  } catch (const UsageError& e) {
    std::cerr << "dockhand-driver: " << e.what() << "\n\n" << kUsage;
    return static_cast<int>(DriverExit::kUsage);
  }
  if (options.help) {
    std::cout << kUsage;
    return 0;
  }
  if (options.version) {
    std::cout << driverSoftware() << "\n";
    return 0;
  }
  try {
    if (options.command == "decommission") return decommissionCommand(options);
    return options.command == "serve" ? serve(options) : run(options);
  } catch (const ConfigError& e) {
    std::cerr << "dockhand-driver: " << e.what() << "\n";
    return static_cast<int>(DriverExit::kConfigError);
  } catch (const std::exception& e) {
    std::cerr << "dockhand-driver: " << e.what() << "\n";
    return static_cast<int>(DriverExit::kJobFailed);
  }
}

}  // namespace dockhand::driver
