// dockhand-bench: measures the agent's start-up, idle footprint, task throughput through the
// reference driver and single-task round trip, each next to a baseline taken on the same
// machine in the same run (raw posix_spawn + waitpid of /bin/true, a loopback TCP ping-pong),
// and prints one table with the ratios and the team's targets.
//
// Every child it starts is owned by an RAII object (killed and reaped on the way out), every
// temp dir is removed, and every wait has a deadline. SIGINT/SIGTERM stop the run at the next
// check; the driver child, if one runs, is asked to stop its agents first.
// (Over 600 lines: one program, one measurement after another, read top to bottom; its
// shared pieces are in sample_stats.h and the integration tests' support headers.)
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <regex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "bench_options.h"
#include "dockhand/base/child_spawn.h"
#include "dockhand/protocol/messages.h"
#include "sample_stats.h"
#include "sanitizer_notice.h"
#include "support/fake_driver.h"
#include "support/process.h"

extern char** environ;

namespace dockhand::bench {
namespace {

namespace fs = std::filesystem;
namespace proto = dockhand::protocol;
using dockhand::testing::ChildProcess;
using dockhand::testing::FakeDriver;
using dockhand::testing::Millis;
using dockhand::testing::TempDir;
using Clock = std::chrono::steady_clock;
using std::chrono_literals::operator""ms;
using std::chrono_literals::operator""s;

constexpr const char* kUsage = R"(usage: dockhand-bench [options]

Measures, in one run: agent start -> registered, idle agent RSS, throughput of N tasks of
/bin/true and of N no-op job library tasks (the `library` runner, on threads and in worker
processes) through dockhand-driver and one agent, the single-task round trip (process and
library), and the same no-op workload on Dask when python3-distributed is installed; each
next to a baseline measured on this machine in the same run. Prints a table (or JSON);
bench/plot turns the JSON into a PNG.

options:
  --tasks N      tasks for the throughput runs and raw spawn rates (default 10000; the
                 no-op library task runs take 10 x N)
  --rounds N     single-task round trips (default 1000)
  --starts N     agent starts for the start-up figure (default 20)
  --quick        small counts (tasks 300, rounds 100, starts 5): a smoke run
  --json         print the results as one JSON object instead of the table
  --round-trip-only
                 only the single-task round trips, /bin/true and library (section 4, with
                 the idle agent of section 2), and their baselines: a short run for
                 comparing two builds
  --bin-dir DIR  where dockhand and dockhand-driver are (default: next to this program)
  -h, --help     print this help

Targets are printed beside the figures with PASS/MISS; they never change the exit code.
exit codes: 0 every figure measured; 1 a measurement failed; 64 bad option; 130 interrupted
)";

// ---- Interruption ------------------------------------------------------------------------

std::atomic<bool> gInterrupted{false};

extern "C" void onStopSignal(int /*sig*/) { gInterrupted.store(true); }

class Interrupted : public std::runtime_error {
 public:
  Interrupted() : std::runtime_error("interrupted") {}
};

void checkInterrupted() {
  if (gInterrupted.load()) throw Interrupted();
}

// Sleeps in short steps so that a signal stops the run promptly.
void sleepFor(Millis duration) {
  auto deadline = Clock::now() + duration;
  while (Clock::now() < deadline) {
    checkInterrupted();
    std::this_thread::sleep_for(std::min<Clock::duration>(deadline - Clock::now(), 20ms));
  }
}

double elapsedMs(Clock::time_point since) {
  return std::chrono::duration<double, std::milli>(Clock::now() - since).count();
}

// ---- Options -----------------------------------------------------------------------------

struct Options {
  int tasks = 10000;
  int rounds = 1000;
  int starts = 20;
  bool quick = false;
  bool json = false;
  bool round_trip_only = false;
  fs::path bin_dir;
};

// Options, or the code to exit with (after the usage or an error was printed).
std::variant<Options, int> parseOptions(int argc, char** argv) {
  Options options;
  std::optional<int> tasks;
  std::optional<int> rounds;
  std::optional<int> starts;
  BenchOptions parser(kUsage);
  parser.count("--tasks", tasks).count("--rounds", rounds).count("--starts", starts);
  parser.flag("--quick", options.quick).flag("--json", options.json);
  parser.flag("--round-trip-only", options.round_trip_only).path("--bin-dir", options.bin_dir);
  if (auto exit_code = parser.parse(argc, argv)) return *exit_code;
  if (options.quick) {
    options.tasks = 300;
    options.rounds = 100;
    options.starts = 5;
  }
  options.tasks = tasks.value_or(options.tasks);
  options.rounds = rounds.value_or(options.rounds);
  options.starts = starts.value_or(options.starts);
  if (options.bin_dir.empty()) options.bin_dir = binDirWith("dockhand", DOCKHAND_BIN_DIR);
  for (const char* program : {"dockhand", "dockhand-driver"}) {
    if (!fs::exists(options.bin_dir / program)) {
      return parser.refuse((options.bin_dir / program).string() + " not found (use --bin-dir)");
    }
  }
  return options;
}

// ---- Results -----------------------------------------------------------------------------

// One line of the table. `reference`/`ratio` compare the figure with a baseline of the same
// run; `pass` is set when the figure has a target.
struct Figure {
  std::string key;
  std::string label;
  double value = std::nan("");
  std::string unit;
  std::string reference;  // e.g. "raw spawn, 2 in flight"
  double ratio = std::nan("");
  std::string target;
  std::optional<bool> pass;

  Figure& comparedWith(std::string what, double value_ratio) {
    reference = std::move(what);
    ratio = value_ratio;
    return *this;
  }
  Figure& withTarget(std::string text, bool met) {
    target = std::move(text);
    pass = met;
    return *this;
  }
};

Figure measured(std::string key, std::string label, double value, std::string unit) {
  Figure figure;
  figure.key = std::move(key);
  figure.label = std::move(label);
  figure.value = value;
  figure.unit = std::move(unit);
  return figure;
}

// Figures grouped in numbered sections; measurements may run in another order than they print.
struct Results {
  std::map<int, std::string> titles;
  std::map<int, std::vector<Figure>> sections;
  std::vector<std::string> errors;
  std::string load_before;  // /proc/loadavg: other work on the machine skews every figure
  std::string load_after;
  int current = 0;

  void section(int number, std::string title) {
    current = number;
    titles[number] = std::move(title);
  }
  void add(Figure figure) { sections[current].push_back(std::move(figure)); }
  // A figure measured earlier in the run, by key.
  std::optional<double> value(const std::string& key) const {
    for (const auto& [number, figures] : sections) {
      for (const Figure& figure : figures) {
        if (figure.key == key) return figure.value;
      }
    }
    return std::nullopt;
  }
};

// ---- Helpers around the agent ------------------------------------------------------------

std::string tail(const std::string& text, std::size_t max_chars = 2000) {
  return text.size() <= max_chars ? text : "..." + text.substr(text.size() - max_chars);
}

std::vector<std::string> agentArgs(const Options& options, const std::string& url,
                                   const std::string& id, const fs::path& work_dir,
                                   const fs::path& config = {}) {
  std::vector<std::string> args;
  if (!config.empty()) args = {"--config", config.string()};
  std::vector<std::string> common = {(options.bin_dir / "dockhand").string(),
                                     "--driver-url",
                                     url,
                                     "--executor-id",
                                     id,
                                     "--app-id",
                                     "bench",
                                     "--cores",
                                     "2",
                                     "--hostname",
                                     "127.0.0.1",
                                     "--work-dir",
                                     work_dir.string()};
  common.insert(common.end(), args.begin(), args.end());
  return common;
}

// The bench job library (bench/noop_job.cpp), built next to the programs.
fs::path benchJobLibrary(const Options& options) {
  fs::path library = options.bin_dir.parent_path() / "lib/dockhand/jobs/libdockhand_bench_jobs.so";
  if (!fs::exists(library)) {
    throw std::runtime_error(library.string() + " not found (build the dockhand-bench target)");
  }
  return library;
}

// An agent config with the process runner and the library runner (`bench` = the bench job
// library, plus `runner_settings`), written to `path`.
fs::path writeLibraryAgentConfig(const Options& options, const fs::path& path,
                                 const nlohmann::json& runner_settings = nlohmann::json::object()) {
  nlohmann::json runner = {{"libraries", {{"bench", benchJobLibrary(options).string()}}}};
  runner.update(runner_settings);
  std::ofstream(path) << nlohmann::json{
      {"plugins", {{{"name", "process"}}, {{"name", "library"}, {"config", runner}}}}};
  return path;
}

FakeDriver::Options quietDriverOptions() {
  FakeDriver::Options options;
  // No heartbeats during a measurement: they would only pile up in the fake's inbox.
  options.properties = {{"dockhand.heartbeat.interval_ms", "60000"}};
  return options;
}

// Asks the agent to stop and waits (bounded) for it to exit; returns how long that took, or
// nullopt when it had to be killed (the ChildProcess destructor does that).
std::optional<double> stopAgent(FakeDriver& driver, ChildProcess& agent) {
  auto t0 = Clock::now();
  driver.send(proto::makeMessage(proto::StopExecutor{}));
  auto code = agent.waitExit(5s);
  if (!code) return std::nullopt;
  return elapsedMs(t0);
}

struct ProcStatus {
  double rss_mib = std::nan("");
  double hwm_mib = std::nan("");
  double anon_mib = std::nan("");  // heap, stacks: the agent's own
  double file_mib = std::nan("");  // mapped program and libraries: shared with other processes
  int threads = 0;
};

ProcStatus readProcStatus(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  ProcStatus status;
  std::string line;
  while (std::getline(in, line)) {
    auto number = [&] { return std::strtod(line.c_str() + line.find(':') + 1, nullptr); };
    if (line.rfind("VmRSS:", 0) == 0) status.rss_mib = number() / 1024.0;
    if (line.rfind("VmHWM:", 0) == 0) status.hwm_mib = number() / 1024.0;
    if (line.rfind("RssAnon:", 0) == 0) status.anon_mib = number() / 1024.0;
    if (line.rfind("RssFile:", 0) == 0) status.file_mib = number() / 1024.0;
    if (line.rfind("Threads:", 0) == 0) status.threads = static_cast<int>(number());
  }
  if (std::isnan(status.rss_mib)) {
    throw std::runtime_error("cannot read VmRSS of pid " + std::to_string(pid));
  }
  return status;
}

// How many times the threads of `pid` went to sleep of their own accord so far (the sum of
// voluntary_ctxt_switches over /proc/PID/task/*/status): over an idle interval, its wakeups.
std::uint64_t voluntarySwitches(pid_t pid) {
  std::uint64_t total = 0;
  std::error_code ec;
  for (const auto& task :
       std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/task", ec)) {
    std::ifstream in(task.path() / "status");
    std::string line;
    while (std::getline(in, line)) {
      if (line.rfind("voluntary_ctxt_switches:", 0) == 0) {
        total += std::strtoull(line.c_str() + line.find(':') + 1, nullptr, 10);
      }
    }
  }
  return total;
}

// ---- 1. Agent start -> registered ----------------------------------------------------------

void measureStartup(const Options& options, Results& results) {
  results.section(1,
                  fmt::format("agent start -> registered ({} starts, FakeDriver)", options.starts));
  TempDir dir;
  std::vector<double> start_ms;
  std::vector<double> stop_ms;
  for (int i = 0; i < options.starts; ++i) {
    checkInterrupted();
    FakeDriver driver(quietDriverOptions());
    std::string id = "start-" + std::to_string(i);
    auto args = agentArgs(options, driver.url(), id, dir.path() / id);
    auto log = (dir.path() / (id + ".log")).string();
    auto t0 = Clock::now();
    ChildProcess agent(args, log);
    if (!driver.waitForRegistration(10s)) {
      throw std::runtime_error("agent did not register within 10 s; its log:\n" +
                               tail(agent.output()));
    }
    start_ms.push_back(elapsedMs(t0));
    if (auto stopped = stopAgent(driver, agent)) stop_ms.push_back(*stopped);
  }
  SampleStats start(start_ms);
  SampleStats stop(stop_ms);
  results.add(
      measured("start_registered_median_ms", "start -> registered, median", start.median(), "ms")
          .withTarget("< 50 ms", start.median() < 50.0));
  results.add(
      measured("start_registered_p90_ms", "start -> registered, p90", start.percentile(90), "ms"));
  results.add(measured("start_registered_min_ms", "start -> registered, min", start.min(), "ms"));
  results.add(
      measured("stop_exit_median_ms", "StopExecutor -> exited, median", stop.median(), "ms"));
}

// `rounds` tasks one after the other on a registered agent: LaunchTask sent -> FINISHED
// received, and -> RUNNING received (decode, task directory, start of the task).
struct RoundTrips {
  std::vector<double> round_trip_us;
  std::vector<double> to_running_us;
};

RoundTrips runRoundTrips(FakeDriver& driver, ChildProcess& agent, int rounds,
                         const std::function<void(proto::LaunchTask&)>& fill) {
  RoundTrips trips;
  trips.round_trip_us.reserve(static_cast<std::size_t>(rounds));
  trips.to_running_us.reserve(static_cast<std::size_t>(rounds));
  for (int i = 1; i <= rounds; ++i) {
    checkInterrupted();
    auto task_id = static_cast<std::uint64_t>(i);
    proto::LaunchTask launch;
    launch.task.task_id = task_id;
    launch.task.name = "rt-" + std::to_string(i);
    fill(launch);
    auto frame = proto::makeMessage(launch);
    auto t0 = Clock::now();
    if (!driver.send(frame)) throw std::runtime_error("the agent's connection is gone");
    while (true) {
      auto update = driver.waitFor(
          [&](const proto::Envelope& e) {
            return e.type == "StatusUpdate" && e.body.value("task_id", std::uint64_t{0}) == task_id;
          },
          10s);
      if (!update) {
        throw std::runtime_error(fmt::format("task {} did not finish within 10 s; agent log:\n{}",
                                             task_id, tail(agent.output())));
      }
      auto state = update->body.value("state", std::string());
      if (state == "RUNNING") {
        trips.to_running_us.push_back(elapsedMs(t0) * 1000.0);
        continue;
      }
      if (state != "FINISHED") {
        throw std::runtime_error(
            fmt::format("task {} ended {}: {}", task_id, state, update->body.dump()));
      }
      break;
    }
    trips.round_trip_us.push_back(elapsedMs(t0) * 1000.0);
  }
  return trips;
}

// ---- 2 + 4. Idle RSS, then single-task round trips on the same agent -----------------------

void measureIdleAndRoundTrip(const Options& options, Results& results, const SampleStats& spawn_us,
                             const SampleStats& runner_like_us, const SampleStats& tcp_us) {
  TempDir dir;
  FakeDriver driver(quietDriverOptions());
  ChildProcess agent(agentArgs(options, driver.url(), "rt", dir.path() / "work"),
                     (dir.path() / "agent.log").string());
  if (!driver.waitForRegistration(10s)) {
    throw std::runtime_error("agent did not register within 10 s; its log:\n" +
                             tail(agent.output()));
  }
  sleepFor(1s);
  ProcStatus idle = readProcStatus(agent.pid());
  results.section(2, "idle agent (registered, 1 s later)");
  results.add(measured("idle_rss_mib", "VmRSS", idle.rss_mib, "MiB")
                  .withTarget("< 8 MiB", idle.rss_mib < 8.0));
  results.add(measured("idle_rss_anon_mib", "  of which RssAnon", idle.anon_mib, "MiB"));
  results.add(measured("idle_rss_file_mib", "  of which RssFile", idle.file_mib, "MiB"));
  results.add(measured("idle_threads", "threads", static_cast<double>(idle.threads), ""));
  // Nothing is due while idle (no heartbeats asked for): every wakeup is a timer of its own.
  const std::uint64_t switches_before = voluntarySwitches(agent.pid());
  sleepFor(2s);
  results.add(measured("idle_wakeups_per_s", "wakeups per second (no heartbeats asked)",
                       static_cast<double>(voluntarySwitches(agent.pid()) - switches_before) / 2.0,
                       "/s"));

  RoundTrips trips = runRoundTrips(driver, agent, options.rounds, [](proto::LaunchTask& launch) {
    launch.task.payload = {{"command", {"/bin/true"}}};
  });
  const std::vector<double>& round_trip_us = trips.round_trip_us;
  const std::vector<double>& to_running_us = trips.to_running_us;
  ProcStatus after = readProcStatus(agent.pid());
  results.add(measured("rss_after_round_trips_mib",
                       fmt::format("VmRSS after {} tasks", options.rounds), after.rss_mib, "MiB"));
  stopAgent(driver, agent);

  SampleStats rt(round_trip_us);
  double floor_us = tcp_us.median() + spawn_us.median();
  results.section(4, fmt::format("single-task round trip ({} sequential, LaunchTask -> FINISHED)",
                                 options.rounds));
  results.add(measured("round_trip_median_us", "round trip, median", rt.median(), "us")
                  .comparedWith("raw spawn + TCP RTT, medians", rt.median() / floor_us)
                  .withTarget("< 1000 us", rt.median() < 1000.0));
  results.add(measured("round_trip_p99_us", "round trip, p99", rt.percentile(99), "us"));
  // A task that ends within the agent's RUNNING hold (BackendOptions::running_hold, 2 ms) is
  // reported by its FINISHED alone: the median is of those whose RUNNING came.
  SampleStats to_running(to_running_us);
  results.add(measured("launch_to_running_median_us", "  of which LaunchTask -> RUNNING, median",
                       to_running.median(), "us")
                  .comparedWith(fmt::format("RUNNING sent for {} of {}", to_running_us.size(),
                                            round_trip_us.size()),
                                std::nan("")));
  results.add(
      measured("tcp_rtt_median_us", "loopback TCP ping-pong, median", tcp_us.median(), "us"));
  results.add(
      measured("tcp_rtt_p99_us", "loopback TCP ping-pong, p99", tcp_us.percentile(99), "us"));
  results.add(measured("spawn_wait_median_us", "raw spawn+wait /bin/true, median",
                       spawn_us.median(), "us"));
  results.add(measured("spawn_wait_p99_us", "raw spawn+wait /bin/true, p99",
                       spawn_us.percentile(99), "us"));
  results.add(measured("runner_like_spawn_median_us", "spawn+wait, reused task dir, median",
                       runner_like_us.median(), "us"));
}

// Single no-op library tasks on an agent with the library runner, on threads and then in
// worker processes: the task path with no process start, next to the loopback RTT.
void measureLibraryRoundTrip(const Options& options, Results& results, const SampleStats& tcp_us) {
  for (bool workers : {false, true}) {
    TempDir dir;
    FakeDriver driver(quietDriverOptions());
    auto config = writeLibraryAgentConfig(
        options, dir.path() / "agent.json",
        workers ? nlohmann::json{{"worker_processes", 2}} : nlohmann::json::object());
    ChildProcess agent(agentArgs(options, driver.url(), "lrt", dir.path() / "work", config),
                       (dir.path() / "agent.log").string());
    if (!driver.waitForRegistration(10s)) {
      throw std::runtime_error("agent did not register within 10 s; its log:\n" +
                               tail(agent.output()));
    }
    RoundTrips trips = runRoundTrips(driver, agent, options.rounds, [](proto::LaunchTask& launch) {
      launch.task.runner = "library";
      launch.task.payload = {{"library", "bench"}, {"function", "noop"}};
    });
    stopAgent(driver, agent);
    SampleStats rt(trips.round_trip_us);
    const std::string mode = workers ? "worker processes" : "threads";
    auto figure =
        measured(workers ? "library_workers_round_trip_median_us" : "library_round_trip_median_us",
                 "library round trip (" + mode + "), median", rt.median(), "us")
            .comparedWith("loopback TCP RTT, median", rt.median() / tcp_us.median());
    if (!workers) figure.withTarget("< 200 us", rt.median() < 200.0);
    results.section(4, fmt::format("single-task round trip ({} sequential, LaunchTask -> FINISHED)",
                                   options.rounds));
    results.add(figure);
    results.add(
        measured(workers ? "library_workers_round_trip_p99_us" : "library_round_trip_p99_us",
                 "library round trip (" + mode + "), p99", rt.percentile(99), "us"));
  }
}

// ---- Baselines: raw spawn-and-wait, loopback TCP -------------------------------------------

pid_t spawnTrue() {
  static char program[] = "/bin/true";
  static char* const kArgv[] = {program, nullptr};
  pid_t pid = -1;
  int rc = posix_spawn(&pid, program, nullptr, nullptr, kArgv, environ);
  if (rc != 0) throw std::runtime_error(std::string("posix_spawn /bin/true: ") + strerror(rc));
  return pid;
}

void reap(pid_t pid) {
  int status = 0;
  // /bin/true ends on its own at once; EINTR (a stop signal) only retries.
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) throw std::runtime_error(std::string("waitpid: ") + strerror(errno));
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    throw std::runtime_error("/bin/true did not exit 0");
  }
}

// What the process runner adds around the spawn, without the agent: a task directory (an
// ended task's, renamed, as the agent reuses them past keep_task_dirs), its stdout and stderr
// opened for the child (there already: truncated), and a process group of the child's own.
SampleStats measureRunnerLikeSpawn(int count) {
  TempDir dir;
  std::vector<double> samples;
  samples.reserve(static_cast<std::size_t>(count));
  static char program[] = "/bin/true";
  static char* const kArgv[] = {program, nullptr};
  fs::path previous = dir.path() / "spare";
  fs::create_directories(previous);
  for (int i = 0; i < count; ++i) {
    if (i % 64 == 0) checkInterrupted();
    auto t0 = Clock::now();
    fs::path task_dir = dir.path() / ("task-" + std::to_string(i));
    fs::rename(previous, task_dir);
    previous = task_dir;
    std::string out = (task_dir / "stdout").string();
    std::string err = (task_dir / "stderr").string();
    ChildSpawn child;
    child.ownProcessGroup().stdinFromNull();
    child.open(1, out, ChildSpawn::kTruncate).open(2, err, ChildSpawn::kTruncate);
    const Result<pid_t> pid = child.start(program, kArgv);
    if (!pid) throw std::runtime_error(pid.error().message);
    reap(*pid);
    samples.push_back(elapsedMs(t0) * 1000.0);
  }
  return SampleStats(std::move(samples));
}

struct SpawnBaseline {
  SampleStats latency_us;  // sequential: one spawn + wait each
  double sequential_per_s = 0;
  double parallel2_per_s = 0;
};

SpawnBaseline measureSpawn(int count) {
  SpawnBaseline baseline;
  std::vector<double> latency;
  latency.reserve(static_cast<std::size_t>(count));
  auto t_all = Clock::now();
  for (int i = 0; i < count; ++i) {
    if (i % 256 == 0) checkInterrupted();
    auto t0 = Clock::now();
    reap(spawnTrue());
    latency.push_back(elapsedMs(t0) * 1000.0);
  }
  baseline.sequential_per_s = count / (elapsedMs(t_all) / 1000.0);
  baseline.latency_us = SampleStats(std::move(latency));

  // Two in flight: as soon as one exits, the next starts.
  std::set<pid_t> running;
  t_all = Clock::now();
  int started = 0;
  try {
    while (started < count || !running.empty()) {
      if (started % 256 == 0) checkInterrupted();
      while (running.size() < 2 && started < count) {
        running.insert(spawnTrue());
        ++started;
      }
      int status = 0;
      pid_t pid = waitpid(-1, &status, 0);
      if (pid < 0 && errno != EINTR) throw std::runtime_error("waitpid(-1) failed");
      running.erase(pid);
    }
  } catch (...) {
    for (pid_t pid : running) reap(pid);
    throw;
  }
  baseline.parallel2_per_s = count / (elapsedMs(t_all) / 1000.0);
  return baseline;
}

class FileDescriptor {
 public:
  explicit FileDescriptor(int fd) : fd_(fd) {
    if (fd_ < 0) throw std::runtime_error(std::string("socket: ") + strerror(errno));
  }
  ~FileDescriptor() { ::close(fd_); }
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

void setSocketOptions(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  timeval timeout{5, 0};  // bounds every read and write of the ping-pong
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof timeout);
}

bool transfer(int fd, char* data, std::size_t size, bool send) {
  std::size_t done = 0;
  while (done < size) {
    ssize_t n = send ? ::send(fd, data + done, size - done, MSG_NOSIGNAL)
                     : ::recv(fd, data + done, size - done, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<std::size_t>(n);
  }
  return true;
}

// A message the size of a LaunchTask frame goes to 127.0.0.1 and comes back, `count` times.
SampleStats measureTcpRoundTrip(int count) {
  constexpr std::size_t kMessageBytes = 256;
  FileDescriptor listener(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (::bind(listener.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::listen(listener.get(), 1) != 0 ||
      ::getsockname(listener.get(), reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    throw std::runtime_error(std::string("loopback listen: ") + strerror(errno));
  }
  FileDescriptor client(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (::connect(client.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    throw std::runtime_error(std::string("loopback connect: ") + strerror(errno));
  }
  FileDescriptor server(::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
  setSocketOptions(client.get());
  setSocketOptions(server.get());

  std::thread echo([fd = server.get()] {
    char buffer[kMessageBytes];
    while (transfer(fd, buffer, sizeof buffer, false) &&
           transfer(fd, buffer, sizeof buffer, true)) {
    }
  });
  std::vector<double> samples;
  samples.reserve(static_cast<std::size_t>(count));
  char message[kMessageBytes];
  std::memset(message, 'x', sizeof message);
  bool ok = true;
  for (int i = 0; i < count && ok; ++i) {
    auto t0 = Clock::now();
    ok = transfer(client.get(), message, sizeof message, true) &&
         transfer(client.get(), message, sizeof message, false);
    samples.push_back(elapsedMs(t0) * 1000.0);
  }
  ::shutdown(client.get(), SHUT_RDWR);
  echo.join();
  if (!ok) throw std::runtime_error("loopback ping-pong failed");
  return SampleStats(std::move(samples));
}

// ---- 3. Throughput through the real driver -------------------------------------------------

struct DriverRun {
  double job_wall_s = 0;  // the driver's own "wall" (first launch to last status)
  double process_s = 0;   // spawn of dockhand-driver to its exit (agent start, stop, clean-up)
};

// A job of `tasks` copies of one task (its JSON text).
void writeJob(const fs::path& path, int tasks, std::string_view task) {
  std::ofstream out(path);
  out << R"({"name": "bench", "tasks": [)";
  for (int i = 0; i < tasks; ++i) out << (i ? "," : "") << "\n" << task;
  out << "]}\n";
  if (!out) throw std::runtime_error("cannot write " + path.string());
}

// `agent_config`: passed to the local agent (--agent-config) when not empty.
// `label` names the run's log file, one per run: the driver's summary is read back from it.
// `launch_ahead`: the driver's --launch-ahead; none: its default ("auto").
DriverRun runDriver(const Options& options, const fs::path& job, int cores, const TempDir& dir,
                    const fs::path& agent_config = {}, const std::string& label = "",
                    std::optional<int> launch_ahead = std::nullopt) {
  // The driver's own limit, and ours a little beyond it: at least 20 tasks/s.
  int timeout_s = std::max(60, options.tasks / 20);
  std::vector<std::string> args = {(options.bin_dir / "dockhand-driver").string(),
                                   "run",
                                   job.string(),
                                   "--local-agents",
                                   "1",
                                   "--cores",
                                   std::to_string(cores),
                                   "--quiet",
                                   "--timeout",
                                   std::to_string(timeout_s)};
  if (!agent_config.empty()) {
    args.emplace_back("--agent-config");
    args.push_back(agent_config.string());
  }
  if (launch_ahead) {
    args.emplace_back("--launch-ahead");
    args.push_back(std::to_string(*launch_ahead));
  }
  auto log = dir.path() / (job.stem().string() + label + "-cores" + std::to_string(cores) + ".log");
  auto t0 = Clock::now();
  ChildProcess driver(args, log.string());
  std::optional<int> code;
  auto deadline = t0 + std::chrono::seconds(timeout_s + 30);
  while (!code) {
    code = driver.waitExit(100ms);
    if (code) break;
    if (gInterrupted.load() || Clock::now() > deadline) {
      // Let the driver stop its agents (it kills its tasks and exits 130), then give up on it.
      driver.signal(SIGTERM);
      driver.waitExit(15s);
      if (gInterrupted.load()) throw Interrupted();
      throw std::runtime_error("dockhand-driver did not end within its time limit");
    }
  }
  DriverRun run;
  run.process_s = elapsedMs(t0) / 1000.0;
  std::string output = driver.output();
  if (*code != 0) {
    throw std::runtime_error(
        fmt::format("dockhand-driver --cores {} exited {}:\n{}", cores, *code, tail(output)));
  }
  std::smatch match;
  static const std::regex kWall(R"(wall ([0-9]+(\.[0-9]+)?)s)");
  if (!std::regex_search(output, match, kWall)) {
    throw std::runtime_error("no 'wall' in the driver's summary:\n" + tail(output));
  }
  run.job_wall_s = std::stod(match[1].str());
  return run;
}

void measureThroughput(const Options& options, Results& results, const SpawnBaseline& spawn) {
  TempDir dir;
  auto job = dir.path() / "bench.json";
  writeJob(job, options.tasks, R"({"command": ["/bin/true"]})");
  results.section(
      3, fmt::format("throughput: {} x /bin/true, dockhand-driver + 1 agent", options.tasks));
  for (int cores : {2, 1}) {
    checkInterrupted();
    DriverRun run = runDriver(options, job, cores, dir);
    double rate = options.tasks / run.job_wall_s;
    double raw = cores == 2 ? spawn.parallel2_per_s : spawn.sequential_per_s;
    results.add(
        measured(fmt::format("throughput_cores{}_per_s", cores),
                 fmt::format("--cores {}, job wall", cores), rate, "tasks/s")
            .comparedWith(cores == 2 ? "raw spawn+wait, 2 in flight" : "raw spawn+wait, serial",
                          rate / raw)
            .withTarget(">= 0.80 x raw", rate >= 0.8 * raw));
    results.add(measured(fmt::format("throughput_cores{}_process_per_s", cores),
                         fmt::format("--cores {}, whole driver process", cores),
                         options.tasks / run.process_s, "tasks/s")
                    .comparedWith(fmt::format("{:.2f} s in all", run.process_s), std::nan("")));
  }
  results.add(measured("spawn_serial_per_s", "raw spawn+wait /bin/true, serial",
                       spawn.sequential_per_s, "/s"));
  results.add(measured("spawn_parallel2_per_s", "raw spawn+wait /bin/true, 2 in flight",
                       spawn.parallel2_per_s, "/s"));
}

constexpr int kLibraryTasksPerTask = 10;
// Each library figure is the median of this many runs: one run of a second or two on a shared
// machine moves by a fifth either way (16,400 to 20,800/s in four runs of one build).
constexpr int kLibraryRuns = 3;

// `tasks` over the job's wall, the median of kLibraryRuns calls of `run`.
double medianRate(int tasks, const std::function<DriverRun()>& run) {
  std::vector<double> rates;
  for (int i = 0; i < kLibraryRuns; ++i) {
    checkInterrupted();
    rates.push_back(tasks / run().job_wall_s);
  }
  std::sort(rates.begin(), rates.end());
  return rates[rates.size() / 2];
}

// No-op tasks of a job library (bench/noop_job.cpp) through the agent's `library` runner: the
// task path with no process at all, next to the /bin/true figure of the same cores.
void measureLibraryThroughput(const Options& options, Results& results) {
  // Ten times --tasks: a no-op library task is about ten times quicker than /bin/true, so each
  // run lasts about as long as section 3's, and neither the driver's wall (printed to 10 ms)
  // nor the job's first tasks (sent only to free cores until they prove short) weigh much.
  const int tasks = options.tasks * kLibraryTasksPerTask;
  TempDir dir;
  auto job = dir.path() / "library.json";
  writeJob(job, tasks, R"({"library": "bench", "function": "noop"})");
  auto config = writeLibraryAgentConfig(options, dir.path() / "agent.json");
  auto workers_config = writeLibraryAgentConfig(options, dir.path() / "agent-workers.json",
                                                {{"worker_processes", 2}});
  results.section(5, fmt::format("throughput: {} no-op library tasks (job library, no process), "
                                 "dockhand-driver + 1 agent, median of {} runs",
                                 tasks, kLibraryRuns));
  for (int cores : {2, 1}) {
    const double rate =
        medianRate(tasks, [&] { return runDriver(options, job, cores, dir, config); });
    auto process = results.value(fmt::format("throughput_cores{}_per_s", cores));
    auto figure = measured(fmt::format("library_cores{}_per_s", cores),
                           fmt::format("--cores {}, threads, job wall", cores), rate, "tasks/s")
                      .comparedWith(fmt::format("/bin/true tasks, --cores {}", cores),
                                    process ? rate / *process : std::nan(""));
    if (cores == 2) figure.withTarget(">= 20,000/s", rate >= 20000);
    results.add(figure);
  }
  const double rate = medianRate(
      tasks, [&] { return runDriver(options, job, 2, dir, workers_config, "-workers"); });
  auto threads = results.value("library_cores2_per_s");
  results.add(measured("library_workers_cores2_per_s", "--cores 2, 2 worker processes, job wall",
                       rate, "tasks/s")
                  .comparedWith("the same on threads", threads ? rate / *threads : std::nan("")));
  // The driver's default ("auto") sends tasks ahead once they prove short; 0 never does (Spark's
  // way: each core waits a round trip per task); 2 always sends 2 cores' worth.
  const auto with_launch_ahead = [&](const std::string& key, const std::string& suffix,
                                     int launch_ahead) {
    const double ahead_rate = medianRate(
        tasks, [&] { return runDriver(options, job, 2, dir, config, suffix, launch_ahead); });
    return measured(key, fmt::format("--cores 2, threads, --launch-ahead {}", launch_ahead),
                    ahead_rate, "tasks/s")
        .comparedWith("the driver's default (auto)",
                      threads ? ahead_rate / *threads : std::nan(""));
  };
  results.add(with_launch_ahead("library_spark_cores2_per_s", "-spark", 0));
  auto ahead = with_launch_ahead("library_ahead_cores2_per_s", "-ahead", 2);
  results.add(ahead.withTarget(">= 20,000/s", ahead.value >= 20000));
}

// The same no-op workload on Dask (bench/dask_noop.py: Client.map over a LocalCluster of one
// worker process with two threads), when Debian's python3-distributed is installed.
void measureDask(const Options& options, Results& results) {
  results.section(6, fmt::format("the same {} no-op tasks on Dask (LocalCluster: 1 worker, "
                                 "2 threads)",
                                 options.tasks));
  const char* python = "/usr/bin/python3";  // Debian's, where python3-distributed installs
  if (!fs::exists(DOCKHAND_BENCH_DASK_SCRIPT) || !fs::exists(python) ||
      std::system("/usr/bin/python3 -c 'import distributed' >/dev/null 2>&1") != 0) {
    results.add(measured("dask_per_s", "Dask: not measured (install python3-distributed)",
                         std::nan(""), ""));
    return;
  }
  TempDir dir;
  ChildProcess dask({python, DOCKHAND_BENCH_DASK_SCRIPT, std::to_string(options.tasks),
                     std::to_string(std::min(options.rounds, 300))},
                    (dir.path() / "dask.log").string());
  auto code = dask.waitExit(std::chrono::seconds(60 + options.tasks / 50));
  const std::string output = dask.output();
  if (!code || *code != 0) throw std::runtime_error("the Dask run failed:\n" + tail(output));
  auto line = output.rfind("{\"dask\"");
  if (line == std::string::npos) throw std::runtime_error("no result from Dask:\n" + tail(output));
  auto parsed = nlohmann::json::parse(output.substr(line, output.find('\n', line) - line));
  const double rate = parsed.at("per_s").get<double>();
  const double rt_us = parsed.at("round_trip_median_us").get<double>();
  auto library = results.value("library_cores2_per_s");
  results.add(measured("dask_per_s", "Dask Client.map, wall", rate, "tasks/s")
                  .comparedWith("dockhand library tasks --cores 2 / Dask",
                                library ? *library / rate : std::nan("")));
  auto library_rt = results.value("library_round_trip_median_us");
  results.add(measured("dask_round_trip_median_us", "Dask submit().result(), median", rt_us, "us")
                  .comparedWith("dockhand library round trip / Dask",
                                library_rt ? *library_rt / rt_us : std::nan("")));
  results.add(measured("dask_version", "Dask distributed " + parsed.value("version", "?"),
                       std::nan(""), ""));
}

// ---- Output ------------------------------------------------------------------------------

std::string utcNow() {
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%d %H:%M UTC", &tm);
  return text;
}

std::string machine() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  std::string model = "unknown CPU";
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("model name", 0) == 0) {
      model = line.substr(line.find(':') + 2);
      break;
    }
  }
  utsname uts{};
  uname(&uts);
  return fmt::format("{} CPUs ({}), Linux {}", std::thread::hardware_concurrency(), model,
                     uts.release);
}

// The 1, 5 and 15 minute load averages.
std::string loadAverage() {
  std::ifstream in("/proc/loadavg");
  std::string one, five, fifteen;
  in >> one >> five >> fifteen;
  return one + " " + five + " " + fifteen;
}

std::string formatValue(double value) {
  if (std::isnan(value)) return "n/a";
  if (value == std::round(value) && std::fabs(value) < 1e9) return fmt::format("{:.0f}", value);
  if (std::fabs(value) >= 100) return fmt::format("{:.0f}", value);
  if (std::fabs(value) >= 10) return fmt::format("{:.1f}", value);
  return fmt::format("{:.2f}", value);
}

void printTable(const Options& options, const Results& results) {
  fmt::print("dockhand-bench  {}  {}\n", utcNow(), machine());
  if (options.round_trip_only) {
    fmt::print("counts: {} round trips (--round-trip-only); load average {} before, {} after\n\n",
               options.rounds, results.load_before, results.load_after);
  } else {
    fmt::print(
        "counts: {} starts, {} tasks, {} round trips{}; load average {} before, {} after\n\n",
        options.starts, options.tasks, options.rounds, options.quick ? " (--quick)" : "",
        results.load_before, results.load_after);
  }
  fmt::print("{:<40} {:>9} {:<8} {:<30} {:>6}  {:<14} {}\n", "figure", "value", "unit", "reference",
             "ratio", "target", "");
  for (const auto& [number, figures] : results.sections) {
    fmt::print("-- {}. {}\n", number, results.titles.at(number));
    for (const Figure& f : figures) {
      std::string verdict = f.pass ? (*f.pass ? "PASS" : "MISS") : "";
      fmt::print("{:<40} {:>9} {:<8} {:<30} {:>6}  {:<14} {}\n", f.label, formatValue(f.value),
                 f.unit, f.reference, std::isnan(f.ratio) ? "" : fmt::format("{:.2f}", f.ratio),
                 f.target, verdict);
    }
  }
  for (const auto& error : results.errors) fmt::print("\nERROR: {}\n", error);
}

void printJson(const Options& options, const Results& results) {
  nlohmann::json out;
  out["date"] = utcNow();
  out["machine"] = machine();
  out["counts"] = {{"starts", options.starts},
                   {"tasks", options.tasks},
                   {"rounds", options.rounds},
                   {"quick", options.quick},
                   {"round_trip_only", options.round_trip_only}};
  out["load_average"] = {{"before", results.load_before}, {"after", results.load_after}};
  out["figures"] = nlohmann::json::object();
  for (const auto& [number, figures] : results.sections) {
    for (const Figure& f : figures) {
      nlohmann::json figure = {{"label", f.label}, {"unit", f.unit}};
      figure["value"] = std::isnan(f.value) ? nlohmann::json() : nlohmann::json(f.value);
      if (!f.reference.empty()) figure["reference"] = f.reference;
      if (!std::isnan(f.ratio)) figure["ratio"] = f.ratio;
      if (!f.target.empty()) figure["target"] = f.target;
      if (f.pass) figure["pass"] = *f.pass;
      out["figures"][f.key] = figure;
    }
  }
  out["errors"] = results.errors;
  std::cout << out.dump(2) << "\n";
}

int run(int argc, char** argv) {
  noticeSanitizer();
  auto parsed = parseOptions(argc, argv);
  if (const int* exit_code = std::get_if<int>(&parsed)) return *exit_code;
  const Options& options = std::get<Options>(parsed);

  struct sigaction action {};
  action.sa_handler = onStopSignal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);

  Results results;
  results.load_before = loadAverage();
  auto attempt = [&](const char* what, const auto& measure) {
    try {
      measure();
    } catch (const Interrupted&) {
      throw;
    } catch (const std::exception& e) {
      results.errors.push_back(std::string(what) + ": " + e.what());
    }
  };
  try {
    if (!options.json) std::cerr << "dockhand-bench: measuring baselines...\n";
    SpawnBaseline spawn;
    SampleStats tcp;
    SampleStats runner_like;
    // Alone, the round trip's baselines take as many spawns as it has rounds.
    attempt("raw spawn", [&] {
      spawn = measureSpawn(options.round_trip_only ? options.rounds : options.tasks);
    });
    attempt("runner-like spawn", [&] { runner_like = measureRunnerLikeSpawn(options.rounds); });
    attempt("loopback TCP", [&] { tcp = measureTcpRoundTrip(std::max(options.rounds, 10000)); });
    if (!options.round_trip_only) {
      if (!options.json) std::cerr << "dockhand-bench: agent start-up...\n";
      attempt("agent start-up", [&] { measureStartup(options, results); });
    }
    if (!options.json) std::cerr << "dockhand-bench: idle agent and round trips...\n";
    attempt("idle agent / round trip",
            [&] { measureIdleAndRoundTrip(options, results, spawn.latency_us, runner_like, tcp); });
    if (!options.round_trip_only) {
      if (!options.json) std::cerr << "dockhand-bench: throughput through dockhand-driver...\n";
      attempt("throughput", [&] { measureThroughput(options, results, spawn); });
      if (!options.json) std::cerr << "dockhand-bench: no-op library tasks...\n";
      attempt("library throughput", [&] { measureLibraryThroughput(options, results); });
    }
    if (!options.json) std::cerr << "dockhand-bench: library round trips...\n";
    attempt("library round trip", [&] { measureLibraryRoundTrip(options, results, tcp); });
    if (!options.round_trip_only) {
      if (!options.json) std::cerr << "dockhand-bench: the same on Dask...\n";
      attempt("Dask", [&] { measureDask(options, results); });
    }
  } catch (const Interrupted&) {
    std::cerr << "dockhand-bench: interrupted\n";
    return 130;
  }
  results.load_after = loadAverage();
  if (options.json) {
    printJson(options, results);
  } else {
    printTable(options, results);
  }
  return results.errors.empty() ? 0 : 1;
}

}  // namespace
}  // namespace dockhand::bench

// NOLINTNEXTLINE(bugprone-exception-escape): an unexpected error still ends in std::terminate
int main(int argc, char** argv) { return dockhand::bench::run(argc, argv); }
