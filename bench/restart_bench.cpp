// dockhand-restart-bench: how long a restart in place (SIGUSR2, what a package upgrade sends)
// keeps an agent away from its driver and its readers, by the number of blocks it holds.
//
//   dockhand-restart-bench [--blocks N,N,...] [--block-kib K] [--tasks T] [--rounds R]
//                          [--dir DIR]
//
// For each count N (default 0,100,1000): the real `dockhand` under a scripted driver that holds
// it across connections runs one task that leaves N blocks of K KiB (default 64), then gets
// SIGUSR2. Meanwhile a reader fetches those blocks in turn with the agents' own input-fetch
// code (fetchBlockRetrying: a broken connection is tried again for up to 15 s), as a reduce on a
// peer would. Per round:
//   * resumed: SIGUSR2 -> the driver has the ResumeExecutor (the agent is back, its blocks
//     listed again; the new process read and verified each block first);
//   * serving: SIGUSR2 -> the first block (for N = 0: /readyz) answered again;
//   * fetches: how many the reader made during the restart, how many failed for good (goal 0),
//     and the slowest;
//   * tasks kept: of T process tasks (default 20) running across the restart, how many ended
//     FINISHED once let go after it (goal: all; each one lost would run again).
// Each figure is the median of R rounds (default 3).
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench_options.h"
#include "blocks/block_fetcher.h"
#include "dockhand/protocol/messages.h"
#include "sample_stats.h"
#include "sanitizer_notice.h"
#include "support/fake_driver.h"
#include "support/http_client.h"
#include "support/process.h"

namespace {

namespace fs = std::filesystem;
using dockhand::bench::BenchOptions;
using Clock = std::chrono::steady_clock;
namespace proto = dockhand::protocol;
using dockhand::bench::SampleStats;
using dockhand::testing::ChildProcess;
using dockhand::testing::FakeDriver;
using std::chrono_literals::operator""s;

struct Options {
  fs::path dir;
  std::vector<int> counts = {0, 100, 1000};
  int block_kib = 64;
  int rounds = 3;
  int tasks = 20;
};

struct Round {
  double resumed_ms = 0;
  double serving_ms = 0;
  std::size_t fetches = 0;
  std::size_t failed = 0;
  double slowest_fetch_ms = 0;
  int tasks_kept = 0;
  std::string problem;
};

double millis(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

std::string blockId(int i) { return "shuffle_0_" + std::to_string(i) + "_0"; }

Round restartOnce(const Options& o, int blocks, int round) {
  Round out;
  const fs::path dir = o.dir / ("n" + std::to_string(blocks) + "-r" + std::to_string(round));
  fs::create_directories(dir);
  FakeDriver::Options driver_options;
  driver_options.accept_resume = true;
  FakeDriver driver(driver_options);
  // A fixed block port, as a deployed agent has (7337): readers keep their URLs across the
  // restart. With port 0 the new process would listen elsewhere and every reader would fail.
  dockhand::testing::writeFile(dir / "agent.json",
                               R"({"reconnect_timeout_ms": 60000, "block_port": )" +
                                   std::to_string(dockhand::testing::unusedPort()) + "}");
  ChildProcess agent(
      {dockhand::testing::agentBinary(), "--driver-url", driver.url(), "--executor-id", "bench",
       "--app-id", "restart-bench", "--cores", std::to_string(std::max(2, o.tasks)), "--hostname",
       "127.0.0.1", "--work-dir", (dir / "work").string(), "--config",
       (dir / "agent.json").string(), "--log-level", "warn"},
      (dir / "agent.log").string());
  if (!driver.waitForRegistration(30s)) {
    out.problem = "the agent did not register:\n" + agent.output();
    return out;
  }
  proto::LaunchTask launch;
  launch.task.task_id = 1;
  launch.task.name = "make-blocks";
  launch.task.payload = {
      {"shell", "i=0; while [ $i -lt " + std::to_string(blocks) + " ]; do head -c " +
                    std::to_string(o.block_kib * 1024) +
                    " /dev/urandom > \"$DOCKHAND_OUTPUT_DIR/shuffle_0_${i}_0\" || exit 1; " +
                    "i=$((i+1)); done"}};
  driver.send(proto::makeMessage(launch));
  if (!driver.waitForStatus(1, proto::TaskState::kFinished, std::chrono::seconds(300))) {
    out.problem = "the task that makes the blocks did not finish:\n" + agent.output();
    return out;
  }
  const std::string block_url = driver.agentBlockUrl();
  // The tasks that run across the restart: each waits for `go`.
  const fs::path go = dir / "go";
  for (int t = 0; t < o.tasks; ++t) {
    proto::LaunchTask running;
    running.task.task_id = 100 + static_cast<std::uint64_t>(t);
    running.task.name = "runs-across";
    running.task.payload = {
        {"shell", "while [ ! -e '" + go.string() + "' ]; do sleep 0.02; done; echo kept"}};
    driver.send(proto::makeMessage(running));
  }
  for (int t = 0; t < o.tasks; ++t) {
    if (!driver.waitForStatus(100 + static_cast<std::uint64_t>(t), proto::TaskState::kRunning,
                              std::chrono::seconds(60))) {
      out.problem = "task " + std::to_string(100 + t) + " did not start:\n" + agent.output();
      return out;
    }
  }

  // The reader: the blocks in turn, as long as the restart lasts, with the agents' own fetch.
  std::atomic<bool> stop{false};
  std::atomic<bool> never{false};
  std::mutex mutex;  // over fetch_ms and failed
  std::vector<double> fetch_ms;
  std::size_t failed = 0;
  std::thread reader;
  if (blocks > 0) {
    reader = std::thread([&] {
      const fs::path into = dir / "fetched";
      fs::create_directories(into);
      for (int i = 0; !stop; i = (i + 1) % blocks) {
        proto::InputBlock input;
        input.id = blockId(i);
        input.url = block_url + "/blocks/" + input.id;
        const auto started = Clock::now();
        try {
          dockhand::agent::fetchBlockRetrying(input, into / input.id, never,
                                              std::chrono::milliseconds(30000),
                                              std::chrono::milliseconds(15000));
          std::lock_guard lock(mutex);
          fetch_ms.push_back(millis(Clock::now() - started));
        } catch (const dockhand::agent::FetchError&) {
          std::lock_guard lock(mutex);
          ++failed;
        }
        std::error_code ec;
        fs::remove(into / input.id, ec);
      }
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the reader is at work
  }

  std::size_t before = 0;
  {
    std::lock_guard lock(mutex);
    before = fetch_ms.size();
  }
  const auto signalled = Clock::now();
  agent.signal(SIGUSR2);
  if (!driver.waitForType("ResumeExecutor", std::chrono::seconds(120))) {
    out.problem = "the agent did not resume:\n" + agent.output();
  }
  out.resumed_ms = millis(Clock::now() - signalled);
  for (;;) {
    const std::string url = blocks > 0 ? driver.agentBlockUrl() + "/blocks/" + blockId(0)
                                       : driver.agentBlockUrl() + "/readyz";
    if (dockhand::testing::httpGet(url).status == 200) break;
    if (Clock::now() - signalled > std::chrono::seconds(120)) {
      out.problem = "the agent did not serve again:\n" + agent.output();
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  out.serving_ms = millis(Clock::now() - signalled);
  dockhand::testing::writeFile(go, "");
  for (int t = 0; t < o.tasks; ++t) {
    if (driver.waitForStatus(100 + static_cast<std::uint64_t>(t), proto::TaskState::kFinished,
                             std::chrono::seconds(30))) {
      ++out.tasks_kept;
    }
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  stop = true;
  if (reader.joinable()) reader.join();
  out.fetches = fetch_ms.size() - before + failed;
  out.failed = failed;
  for (std::size_t i = before; i < fetch_ms.size(); ++i) {
    out.slowest_fetch_ms = std::max(out.slowest_fetch_ms, fetch_ms[i]);
  }
  agent.signal(SIGTERM);
  agent.waitExit(30s);
  return out;
}

int runBench(int argc, char** argv) {
  dockhand::bench::noticeSanitizer();
  Options o;
  const char* tmp = std::getenv("TMPDIR");
  fs::path base = tmp != nullptr && *tmp != '\0' ? tmp : "/tmp";
  BenchOptions parser(
      "usage: dockhand-restart-bench [--blocks N,N,...] [--block-kib K] [--tasks T] "
      "[--rounds R] [--dir DIR]");
  parser.counts("--blocks", o.counts).count("--block-kib", o.block_kib);
  parser.count("--tasks", o.tasks, 0).count("--rounds", o.rounds).path("--dir", base);
  if (auto exit_code = parser.parse(argc, argv)) return *exit_code;
  o.dir = base / ("dockhand-restart-bench-" + std::to_string(::getpid()));
  fs::create_directories(o.dir);
  std::printf(
      "restart bench: restart in place (SIGUSR2) with N blocks of %d KiB and %d running process "
      "tasks, %d round(s), in %s\n",
      o.block_kib, o.tasks, o.rounds, o.dir.c_str());
  std::printf("%8s  %12s  %12s  %9s  %7s  %14s  %11s\n", "blocks", "resumed ms", "serving ms",
              "fetches", "failed", "slowest fetch", "tasks kept");
  int status = 0;
  for (int n : o.counts) {
    std::vector<double> resumed, serving, slowest;
    std::size_t fetches = 0, failed = 0;
    int kept = o.tasks;  // the fewest of any round
    for (int r = 0; r < o.rounds; ++r) {
      const Round round = restartOnce(o, n, r);
      if (!round.problem.empty()) {
        std::fprintf(stderr, "blocks %d, round %d: %s\n", n, r + 1, round.problem.c_str());
        status = 1;
        continue;
      }
      resumed.push_back(round.resumed_ms);
      serving.push_back(round.serving_ms);
      slowest.push_back(round.slowest_fetch_ms);
      fetches += round.fetches;
      failed += round.failed;
      kept = std::min(kept, round.tasks_kept);
    }
    std::printf("%8d  %12.1f  %12.1f  %9zu  %7zu  %11.1f ms  %7d/%-3d\n", n,
                SampleStats(resumed).median(), SampleStats(serving).median(), fetches, failed,
                SampleStats(slowest).median(), kept, o.tasks);
    if (failed > 0 || kept < o.tasks) status = 1;
  }
  std::error_code ec;
  fs::remove_all(o.dir, ec);
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return runBench(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "restart bench: %s\n", e.what());
  } catch (...) {
    std::fprintf(stderr, "restart bench: an unknown error\n");
  }
  return 1;
}
