// dockhand-fleet-bench: one real dockhand-driver holding many real agents on this machine.
//
//   dockhand-fleet-bench [--agents N] [--tasks T] [--blocks B] [--decommission D]
//                        [--idle-seconds S] [--simulated] [--bin-dir DIR]
//
// With --simulated the agents are not processes but simulated agents held by this program
// (hollow_fleet.h): real connections speaking the real protocol, answering every task at once
// and moving blocks by telling the driver, so that a driver is measured with 10,000 agents on
// one machine. The one-agent baseline is then a simulated agent too.
//
// Every agent is the real `dockhand` program with `--cores 1` and the library runner (no
// process per task), connected to one `dockhand-driver run` over loopback. In one run:
//   0. baseline:     the same job on one agent (--cores 2), the driver's rate with one agent;
//   1. registration: N agents are started first and wait for the driver (they retry their
//                    connection every few ms), then the driver starts: the time until all N
//                    are registered is the driver taking N connections at once;
//   2. scheduling:   a job of T no-op tasks and B tasks that each leave a 16 KiB block, over
//                    all N agents: tasks/s by the driver's own job wall clock, next to (0);
//   3. idle:         the agents only heartbeat (every 10 s, the default): the driver's CPU
//                    (utime + stime from /proc) over S seconds, its RSS and threads;
//   4. decommission: D agents that hold blocks are told to decommission at once (the control
//                    API); timed until the driver lists none of them and every block it knew
//                    of is held by another agent.
// Targets (docs/benchmarks.md): all registered within 10 s; idle driver under 5 % of a core;
// scheduling rate with N agents at least half the rate with one.
// Every child is owned by a ChildProcess (killed and reaped on the way out), every wait has a
// deadline, and the temp dir is removed.
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <variant>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "bench_options.h"
#include "hollow_fleet.h"
#include "sanitizer_notice.h"
#include "support/http_client.h"
#include "support/process.h"

namespace {

namespace fs = std::filesystem;
using dockhand::bench::BenchOptions;
using dockhand::bench::binDirWith;
using Clock = std::chrono::steady_clock;
using Json = nlohmann::json;
using dockhand::testing::ChildProcess;
using dockhand::testing::TempDir;
using std::chrono_literals::operator""ms;
using std::chrono_literals::operator""s;

struct Options {
  int agents = 1000;
  int tasks = 20000;
  int blocks = 2000;
  int decommission = 100;
  int idle_seconds = 20;
  bool simulated = false;
  fs::path bin_dir;
};

double secondsSince(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// A job of `tasks` no-op tasks and `blocks` tasks that each leave one block.
void writeJob(const fs::path& path, int tasks, int blocks) {
  Json list = Json::array();
  for (int i = 0; i < tasks; ++i) list.push_back({{"library", "bench"}, {"function", "noop"}});
  for (int i = 0; i < blocks; ++i) {
    list.push_back({{"library", "bench"},
                    {"function", "fill"},
                    {"partition", i},
                    {"outputs", {fmt::format("rdd_1_{}", i)}}});
  }
  std::ofstream(path) << Json{{"name", "fleet"}, {"tasks", list}}.dump();
}

fs::path writeAgentConfig(const Options& o, const fs::path& path) {
  fs::path library = o.bin_dir.parent_path() / "lib/dockhand/jobs/libdockhand_bench_jobs.so";
  if (!fs::exists(library)) {
    throw std::runtime_error(library.string() +
                             " not found (build the dockhand-fleet-bench target)");
  }
  // Started before the driver listens: retry the connection every 10 ms x attempt.
  std::ofstream(path) << Json{{"connect_tries", 1000},
                              {"connect_retry_delay_ms", 10},
                              {"plugins",
                               {{{"name", "library"},
                                 {"config", {{"libraries", {{"bench", library}}}}}}}}}
                             .dump();
  return path;
}

// Room for every agent's connection (server_threads is the most agents a driver holds).
fs::path writeDriverConfig(int agents, const fs::path& path) {
  std::ofstream(path) << Json{{"server_threads", std::max(4096, agents + 64)}}.dump();
  return path;
}

struct ProcStats {
  double cpu_seconds = 0;  // utime + stime
  long rss_kib = 0;
  long threads = 0;
};

ProcStats procStats(pid_t pid) {
  ProcStats s;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  // Fields after the command name (which may hold spaces) start after the last ')'.
  auto close = text.rfind(')');
  if (close != std::string::npos) {
    std::istringstream fields(text.substr(close + 2));
    std::vector<std::string> f;
    for (std::string x; fields >> x;) f.push_back(x);
    // f[0] is field 3 (state): utime is field 14, stime field 15.
    if (f.size() > 13) {
      const auto ticks = static_cast<double>(::sysconf(_SC_CLK_TCK));
      s.cpu_seconds = (std::stod(f[11]) + std::stod(f[12])) / ticks;
    }
  }
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("VmRSS:", 0) == 0) s.rss_kib = std::stol(line.substr(6));
    if (line.rfind("Threads:", 0) == 0) s.threads = std::stol(line.substr(8));
  }
  return s;
}

// The value of one sample line of a /metrics text ("name{labels} value"), or 0.
double metric(const std::string& text, const std::string& series) {
  auto at = text.find("\n" + series + " ");
  if (at == std::string::npos) return 0;
  return std::strtod(text.c_str() + at + series.size() + 2, nullptr);
}

double agentsKnown(const std::string& url) {
  auto reply = dockhand::testing::httpGet(url + "/metrics");
  if (reply.status != 200) return 0;
  double n = 0;
  for (const char* state : {"registered", "active", "decommissioning"}) {
    n += metric(reply.body, fmt::format("dockhand_driver_agents{{state=\"{}\"}}", state));
  }
  return n;
}

void progress(const std::string& what) { std::fprintf(stderr, "fleet bench: %s\n", what.c_str()); }

// The agents of a run: real processes (Fleet) or simulated ones (SimulatedFleet).
class AgentFleet {
 public:
  AgentFleet() = default;
  virtual ~AgentFleet() = default;
  AgentFleet(const AgentFleet&) = delete;
  AgentFleet& operator=(const AgentFleet&) = delete;
  // Starts `count` agents (ids a1..aN) pointed at `port`, where nothing listens yet.
  virtual void start(int count, int cores, int port) = 0;
  // Waits until agent `id` left after its decommission; throws when it did not, or not well.
  virtual void waitDecommissioned(const std::string& id, std::chrono::seconds budget) = 0;
  virtual double cpuSeconds() const = 0;
  // Waits (bounded) for every agent to end after the driver stopped them.
  virtual void waitAllExited(std::chrono::seconds budget) = 0;
};

class SimulatedFleet final : public AgentFleet {
 public:
  void start(int count, int cores, int port) override { hollow_.start(count, cores, port); }
  void waitDecommissioned(const std::string& id, std::chrono::seconds budget) override {
    if (!hollow_.waitGone(id, budget)) {
      throw std::runtime_error(
          fmt::format("simulated agent {} did not leave: {}", id, hollow_.surprise()));
    }
  }
  double cpuSeconds() const override { return hollow_.cpuSeconds(); }
  void waitAllExited(std::chrono::seconds budget) override { hollow_.waitAllGone(budget); }
  std::string surprise() const { return hollow_.surprise(); }

 private:
  dockhand::bench::HollowFleet hollow_;
};

class Fleet final : public AgentFleet {
 public:
  Fleet(const Options& o, fs::path dir, fs::path config)
      : o_(o), dir_(std::move(dir)), config_(std::move(config)) {}

  // Waits until each agent has failed its first connection (so that each is up and retrying).
  void start(int count, int cores, int port) override {
    const fs::path& config = config_;
    for (int i = 1; i <= count; ++i) {
      std::string id = fmt::format("a{}", i);
      fs::path work = dir_ / "work" / id;
      fs::create_directories(work);
      std::vector<std::string> argv = {(o_.bin_dir / "dockhand").string(),
                                       "--driver-url",
                                       fmt::format("ws://127.0.0.1:{}/", port),
                                       "--executor-id",
                                       id,
                                       "--app-id",
                                       "fleet",
                                       "--cores",
                                       std::to_string(cores),
                                       "--hostname",
                                       "127.0.0.1",
                                       "--work-dir",
                                       work.string(),
                                       "--config",
                                       config.string()};
      logs_[id] = dir_ / "logs" / (id + ".log");
      fs::create_directories(logs_[id].parent_path());
      agents_[id] = std::make_unique<ChildProcess>(argv, logs_[id].string());
    }
    std::set<std::string> waiting;
    for (const auto& [id, _] : agents_) waiting.insert(id);
    auto deadline = Clock::now() + std::chrono::seconds(60 + count / 5);
    while (!waiting.empty()) {
      if (Clock::now() > deadline) {
        throw std::runtime_error(fmt::format("{} agents never tried to connect", waiting.size()));
      }
      for (auto it = waiting.begin(); it != waiting.end();) {
        std::ifstream in(logs_[*it]);
        std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        if (text.find("cannot connect") != std::string::npos) {
          it = waiting.erase(it);
        } else if (!agents_[*it]->running()) {
          throw std::runtime_error("agent " + *it + " exited:\n" + text);
        } else {
          ++it;
        }
      }
      std::this_thread::sleep_for(50ms);
    }
  }

  void waitDecommissioned(const std::string& id, std::chrono::seconds budget) override {
    auto code = agents_.at(id)->waitExit(budget);
    if (!code || *code != 0) {
      throw std::runtime_error(fmt::format("decommissioned agent {} exited {}", id,
                                           code ? std::to_string(*code) : "not at all"));
    }
  }

  double cpuSeconds() const override {
    double total = 0;
    for (const auto& [id, child] : agents_) total += procStats(child->pid()).cpu_seconds;
    return total;
  }

  void waitAllExited(std::chrono::seconds budget) override {
    auto deadline = Clock::now() + budget;
    for (auto& [id, child] : agents_) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      child->waitExit(std::max(left, std::chrono::milliseconds(1)));
    }
  }

 private:
  const Options& o_;
  fs::path dir_;
  fs::path config_;
  std::map<std::string, std::unique_ptr<ChildProcess>> agents_;
  std::map<std::string, fs::path> logs_;
};

struct Run {
  double start_agents_s = 0;  // spawn of the first agent -> every agent retrying
  double register_s = 0;      // driver spawn -> every agent registered
  double job_wall_s = 0;      // the driver's own job wall clock
  double rate = 0;
  double driver_busy = 0;  // the driver's CPU seconds per second of the job
  double agents_busy = 0;  // all agents' CPU seconds per second of the job
  // Idle, and the decommission (fleet run only).
  double idle_cpu_fraction = 0;
  double idle_agents_cpu_fraction = 0;  // all agents together
  double heartbeats_per_s = 0;
  ProcStats idle;
  int decommissioned = 0;
  std::uint64_t blocks_moved = 0;
  std::uint64_t blocks_total = 0;
  double decommission_s = 0;
};

std::optional<std::string> waitForSummary(ChildProcess& driver, const fs::path& log,
                                          std::chrono::seconds budget) {
  auto deadline = Clock::now() + budget;
  while (Clock::now() < deadline) {
    std::ifstream in(log);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (text.find("job fleet ") != std::string::npos && text.find(" wall ") != std::string::npos) {
      return text;
    }
    if (!driver.running()) return text;
    std::this_thread::sleep_for(100ms);
  }
  return std::nullopt;
}

Json executors(const std::string& url) {
  auto reply = dockhand::testing::httpGet(url + "/v1/executors");
  if (reply.status != 200)
    throw std::runtime_error("GET /v1/executors: HTTP " + std::to_string(reply.status));
  return Json::parse(reply.body);
}

// Decommissions `count` agents holding blocks at once; returns when the driver lists none of
// them and every block is held by another agent (or a fallback store).
void decommissionSome(const Options& o, const std::string& url, AgentFleet& fleet, Run& run) {
  Json before = executors(url);
  run.blocks_total = before.value("blocks", std::uint64_t{0});
  std::vector<std::string> chosen;
  for (const auto& e : before["executors"]) {
    if (static_cast<int>(chosen.size()) >= o.decommission) break;
    if (e.value("blocks", 0) > 0) {
      chosen.push_back(e["executor_id"].get<std::string>());
      run.blocks_moved += e.value("blocks", std::uint64_t{0});
    }
  }
  auto t0 = Clock::now();
  for (const auto& id : chosen) {
    std::string target = url;
    target += "/v1/executors/";
    target += id;
    target += "/decommission";
    auto reply = dockhand::testing::httpRequest("POST", target);
    if (reply.status != 200) {
      throw std::runtime_error("decommission " + id + ": HTTP " + std::to_string(reply.status) +
                               " " + reply.body);
    }
  }
  auto deadline = t0 + std::chrono::seconds(300);
  for (;;) {
    Json now = executors(url);
    std::set<std::string> listed;
    for (const auto& e : now["executors"]) listed.insert(e["executor_id"].get<std::string>());
    bool gone = std::none_of(chosen.begin(), chosen.end(),
                             [&](const std::string& id) { return listed.count(id) > 0; });
    if (gone && now.value("blocks", std::uint64_t{0}) >= run.blocks_total) break;
    if (Clock::now() > deadline) {
      throw std::runtime_error(fmt::format(
          "the decommission of {} agents did not end within 300 s ({} blocks of {} known)",
          chosen.size(), now.value("blocks", 0), run.blocks_total));
    }
    std::this_thread::sleep_for(100ms);
  }
  run.decommission_s = secondsSince(t0);
  run.decommissioned = static_cast<int>(chosen.size());
  for (const auto& id : chosen) fleet.waitDecommissioned(id, 30s);
}

Run runFleet(const Options& o, int agents, int cores, bool measure_idle) {
  TempDir dir;
  auto job = dir.path() / "job.json";
  writeJob(job, o.tasks, o.blocks);
  const int port = dockhand::testing::unusedPort();
  const std::string url = fmt::format("http://127.0.0.1:{}", port);
  Run run;
  std::unique_ptr<AgentFleet> owned;
  if (o.simulated) {
    owned = std::make_unique<SimulatedFleet>();
  } else {
    owned = std::make_unique<Fleet>(o, dir.path(), writeAgentConfig(o, dir.path() / "agent.json"));
  }
  AgentFleet& fleet = *owned;
  auto t0 = Clock::now();
  fleet.start(agents, cores, port);
  run.start_agents_s = secondsSince(t0);
  progress(fmt::format("{} agent(s) started in {:.1f} s; starting the driver", agents,
                       run.start_agents_s));

  const int linger = measure_idle ? o.idle_seconds + 330 : 0;
  std::vector<std::string> argv = {(o.bin_dir / "dockhand-driver").string(),
                                   "run",
                                   job.string(),
                                   "--local-agents",
                                   "0",
                                   "--min-agents",
                                   std::to_string(agents),
                                   "--listen",
                                   fmt::format("127.0.0.1:{}", port),
                                   "--quiet",
                                   "--timeout",
                                   "600",
                                   "--linger",
                                   std::to_string(linger),
                                   "--config",
                                   writeDriverConfig(agents, dir.path() / "driver.json").string()};
  fs::path log = dir.path() / "driver.log";
  t0 = Clock::now();
  ChildProcess driver(argv, log.string());
  auto deadline = t0 + 120s;
  while (agentsKnown(url) < agents) {
    if (!driver.running() || Clock::now() > deadline) {
      throw std::runtime_error(fmt::format("{} of {} agents registered:\n{}", agentsKnown(url),
                                           agents, driver.output()));
    }
    std::this_thread::sleep_for(20ms);
  }
  run.register_s = secondsSince(t0);
  const double driver_cpu0 = procStats(driver.pid()).cpu_seconds;
  const double agents_cpu0 = fleet.cpuSeconds();
  progress(fmt::format("all registered in {:.2f} s; the job runs", run.register_s));

  auto summary = waitForSummary(driver, log, 600s);
  std::smatch match;
  static const std::regex kWall(R"(job fleet SUCCEEDED.* wall ([0-9]+(\.[0-9]+)?)s)");
  if (!summary || !std::regex_search(*summary, match, kWall)) {
    throw std::runtime_error("the job did not succeed:\n" + summary.value_or(driver.output()));
  }
  run.job_wall_s = std::stod(match[1].str());
  // Over the job and the wait for its summary (at most 100 ms more).
  const double busy_s = secondsSince(t0) - run.register_s;
  run.driver_busy = (procStats(driver.pid()).cpu_seconds - driver_cpu0) / busy_s;
  run.agents_busy = (fleet.cpuSeconds() - agents_cpu0) / busy_s;
  run.rate = (o.tasks + o.blocks) / run.job_wall_s;

  if (measure_idle) {
    progress(fmt::format("job done in {:.2f} s; idle for {} s", run.job_wall_s, o.idle_seconds));
    std::this_thread::sleep_for(2s);  // the job's last frames and result clean-up
    auto metrics_before = dockhand::testing::httpGet(url + "/metrics").body;
    ProcStats a = procStats(driver.pid());
    const double agents_a = fleet.cpuSeconds();
    auto t_idle = Clock::now();
    std::this_thread::sleep_for(std::chrono::seconds(o.idle_seconds));
    ProcStats b = procStats(driver.pid());
    const double agents_b = fleet.cpuSeconds();
    double elapsed = secondsSince(t_idle);
    auto metrics_after = dockhand::testing::httpGet(url + "/metrics").body;
    run.idle = b;
    run.idle_cpu_fraction = (b.cpu_seconds - a.cpu_seconds) / elapsed;
    run.idle_agents_cpu_fraction = (agents_b - agents_a) / elapsed;
    run.heartbeats_per_s = (metric(metrics_after, "dockhand_driver_heartbeats_total") -
                            metric(metrics_before, "dockhand_driver_heartbeats_total")) /
                           elapsed;
    progress(fmt::format("decommissioning {} agents", o.decommission));
    decommissionSome(o, url, fleet, run);
  }
  driver.signal(SIGTERM);  // stops the agents left, then exits
  driver.waitExit(60s);
  fleet.waitAllExited(60s);
  return run;
}

constexpr const char* kUsage =
    "usage: dockhand-fleet-bench [--agents N (1000)] [--tasks T (20000)] [--blocks B (2000)] "
    "[--decommission D (100, < N)] [--idle-seconds S (20)] [--simulated] [--bin-dir DIR]";

// Options, or the code to exit with (after the usage or an error was printed).
std::variant<Options, int> parseOptions(int argc, char** argv) {
  Options o;
  o.bin_dir = binDirWith("dockhand-driver", DOCKHAND_BIN_DIR);
  BenchOptions parser(kUsage);
  parser.count("--agents", o.agents).count("--tasks", o.tasks, 0).count("--blocks", o.blocks, 0);
  parser.count("--decommission", o.decommission, 0).count("--idle-seconds", o.idle_seconds);
  parser.flag("--simulated", o.simulated).path("--bin-dir", o.bin_dir);
  if (auto exit_code = parser.parse(argc, argv)) return *exit_code;
  if (o.tasks + o.blocks == 0) return parser.refuse("--tasks and --blocks are both 0");
  if (o.decommission >= o.agents) return parser.refuse("--decommission must be below --agents");
  return o;
}

// Each agent, and the driver's side of each connection, holds a few descriptors.
void raiseOpenFileLimit() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &limit);
  }
}

}  // namespace

int main(int argc, char** argv) {
  dockhand::bench::noticeSanitizer();
  try {
    auto parsed = parseOptions(argc, argv);
    if (const int* exit_code = std::get_if<int>(&parsed)) return *exit_code;
    const Options& o = std::get<Options>(parsed);
    raiseOpenFileLimit();
    std::printf("fleet bench: job of %d no-op + %d block-writing library tasks; %d cores%s\n",
                o.tasks, o.blocks, static_cast<int>(std::thread::hardware_concurrency()),
                o.simulated ? "; simulated agents (one process, the real protocol)" : "");
    std::fflush(stdout);
    Run one = runFleet(o, 1, 2, false);
    std::printf(
        "  1 agent (--cores 2):   registered in %.2f s, job %.2f s: %.0f tasks/s; CPU: driver "
        "%.2f, agent %.2f cores\n",
        one.register_s, one.job_wall_s, one.rate, one.driver_busy, one.agents_busy);
    std::fflush(stdout);
    Run fleet = runFleet(o, o.agents, 1, true);
    std::printf("  %d agents (--cores 1): started in %.1f s (spawn to all retrying)\n", o.agents,
                fleet.start_agents_s);
    std::printf("    registered:   all %d in %.2f s after the driver started (target <= 10 s)\n",
                o.agents, fleet.register_s);
    std::printf(
        "    scheduling:   job %.2f s: %.0f tasks/s = %.2f x one agent (target >= 0.5); CPU: "
        "driver %.2f, agents %.2f cores\n",
        fleet.job_wall_s, fleet.rate, fleet.rate / one.rate, fleet.driver_busy, fleet.agents_busy);
    std::printf(
        "    idle:         driver %.2f %% of a core over %d s (target < 5 %%), %.0f heartbeats/s, "
        "RSS %.1f MiB, %ld threads; all agents together %.1f %% of a core\n",
        100.0 * fleet.idle_cpu_fraction, o.idle_seconds, fleet.heartbeats_per_s,
        static_cast<double>(fleet.idle.rss_kib) / 1024.0, fleet.idle.threads,
        100.0 * fleet.idle_agents_cpu_fraction);
    std::printf(
        "    decommission: %d agents at once holding %llu of %llu blocks: %.2f s until the driver "
        "listed none of them and knew a new home for every block\n",
        fleet.decommissioned, static_cast<unsigned long long>(fleet.blocks_moved),
        static_cast<unsigned long long>(fleet.blocks_total), fleet.decommission_s);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fleet bench failed: %s\n", e.what());
    return 1;
  }
  return 0;
}
