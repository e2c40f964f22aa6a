// dockhand-migration-bench: how fast a decommissioning agent moves its blocks to a peer,
// against the two limits of the machine it runs on.
//
//   dockhand-migration-bench [--dir DIR] [--blocks N] [--block-mib M] [--concurrency C]
//                            [--rounds R]
//
// In one run, on one file system (DIR, default $TMPDIR or /tmp):
//   1. disk:      N files of M MiB written and fsynced, C at once (a durable copy at best),
//                 once through the page cache and once with O_DIRECT; the faster is the limit;
//   2. loopback:  N x M MiB sent over one TCP connection on 127.0.0.1;
//   3. migration: two agents (the real `dockhand` program, each with a scripted driver) on
//                 127.0.0.1. Agent A runs one task that leaves N blocks of M MiB; then A is told
//                 to decommission and moves them with the `peer` plugin (HTTP PUT, sendfile) to
//                 agent B's block server, which checksums, writes (O_DIRECT where it can),
//                 fsyncs and renames each one before it answers. Timed from DecommissionExecutor to
//                 the UpdateBlockInfo that tells the driver every new location (and, apart, to A's
//                 RemoveExecutor).
// Each round measures all of them in turn (R rounds, default 3); each figure keeps its best
// round. It prints every round, migration / min(disk, loopback) per round and for the best
// rounds, and checks in each round that B holds every block with the checksum A announced.
// Default: 64 x 16 MiB = 1 GiB, 4 at once.
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench_options.h"
#include "dockhand/protocol/messages.h"
#include "sanitizer_notice.h"
#include "support/fake_driver.h"
#include "support/http_client.h"
#include "support/process.h"

namespace {

namespace fs = std::filesystem;
using dockhand::bench::BenchOptions;
using Clock = std::chrono::steady_clock;
namespace proto = dockhand::protocol;
using dockhand::testing::ChildProcess;
using dockhand::testing::FakeDriver;
using std::chrono_literals::operator""s;

struct Options {
  fs::path dir;
  int blocks = 64;
  int block_mib = 16;
  int concurrency = 4;
  int rounds = 3;  // of each figure, interleaved; the best of each counts (a shared disk varies)
};

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }
double mibPerSecond(std::uint64_t bytes, double secs) {
  return static_cast<double>(bytes) / secs / (1 << 20);
}

std::vector<char> randomBytes(std::size_t size) {
  std::vector<char> data(size);
  std::mt19937_64 rng(42);
  for (std::size_t i = 0; i + 8 <= size; i += 8) {
    std::uint64_t v = rng();
    std::memcpy(data.data() + i, &v, 8);
  }
  return data;
}

void writeAll(int fd, const char* data, std::size_t size) {
  while (size > 0) {
    ssize_t n = ::write(fd, data, size);
    if (n <= 0) throw std::runtime_error(std::string("write: ") + std::strerror(errno));
    data += n;
    size -= static_cast<std::size_t>(n);
  }
}

// N files of the block size, each written, fsynced and renamed, as a block store does, by as
// many threads as the migration runs blocks at once (so that fsyncs overlap the same way).
// Buffered: 8 MiB at a time with writeback started after each piece (the store's page-cache
// path). Direct: 1 MiB pieces from aligned memory with O_DIRECT (the store's path for a PUT).
double diskRate(const Options& o, const std::vector<char>& data, bool direct) {
  fs::path dir = o.dir / "disk";
  fs::create_directories(dir);
  constexpr std::size_t kAlign = 4096;
  std::unique_ptr<char, decltype(&std::free)> aligned(
      static_cast<char*>(std::aligned_alloc(kAlign, data.size())), &std::free);
  std::memcpy(aligned.get(), data.data(), data.size());
  auto start = Clock::now();
  std::vector<std::thread> writers;
  writers.reserve(static_cast<std::size_t>(o.concurrency));
  for (int t = 0; t < o.concurrency; ++t) {
    writers.emplace_back([&, t] {
      for (int i = t; i < o.blocks; i += o.concurrency) {
        fs::path temp = dir / ("tmp-" + std::to_string(i));
        int flags = O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | (direct ? O_DIRECT : 0);
        int fd = ::open(temp.c_str(), flags, 0644);
        if (fd < 0) throw std::runtime_error("open " + temp.string() + ": " + std::strerror(errno));
        const std::size_t step = direct ? (1u << 20) : (8u << 20);
        for (std::size_t at = 0; at < data.size(); at += step) {
          std::size_t n = std::min(step, data.size() - at);
          writeAll(fd, (direct ? aligned.get() : data.data()) + at, n);
          if (!direct) {
            ::sync_file_range(fd, static_cast<off_t>(at), static_cast<off_t>(n),
                              SYNC_FILE_RANGE_WRITE);
          }
        }
        ::fsync(fd);
        ::close(fd);
        fs::rename(temp, dir / ("block-" + std::to_string(i)));
      }
    });
  }
  for (auto& w : writers) w.join();
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  ::fsync(dfd);
  ::close(dfd);
  double secs = seconds(Clock::now() - start);
  fs::remove_all(dir);
  return mibPerSecond(static_cast<std::uint64_t>(o.blocks) * data.size(), secs);
}

double diskRateBuffered(const Options& o, const std::vector<char>& data) {
  return diskRate(o, data, false);
}

// 0 where the file system refuses O_DIRECT.
double diskRateDirect(const Options& o, const std::vector<char>& data) {
  fs::path probe = o.dir / ".probe";
  int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_DIRECT | O_CLOEXEC, 0600);
  if (fd >= 0) ::close(fd);
  fs::remove(probe);
  return fd >= 0 ? diskRate(o, data, true) : 0.0;
}

// The same bytes over one TCP connection on loopback, read and dropped by the receiver.
double loopbackRate(const Options& o, const std::vector<char>& data) {
  int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    throw std::runtime_error(std::string("bind: ") + std::strerror(errno));
  }
  socklen_t len = sizeof addr;
  ::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len);
  ::listen(listener, 1);
  const auto total = static_cast<std::uint64_t>(o.blocks) * data.size();
  std::thread receiver([&] {
    int fd = ::accept(listener, nullptr, nullptr);
    std::vector<char> buffer(1 << 20);
    std::uint64_t got = 0;
    while (got < total) {
      ssize_t n = ::recv(fd, buffer.data(), buffer.size(), 0);
      if (n <= 0) break;
      got += static_cast<std::uint64_t>(n);
    }
    ::close(fd);
  });
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    throw std::runtime_error(std::string("connect: ") + std::strerror(errno));
  }
  auto start = Clock::now();
  for (int i = 0; i < o.blocks; ++i) {
    const char* p = data.data();
    std::size_t left = data.size();
    while (left > 0) {
      ssize_t n = ::send(fd, p, left, MSG_NOSIGNAL);
      if (n <= 0) throw std::runtime_error("loopback send failed");
      p += n;
      left -= static_cast<std::size_t>(n);
    }
  }
  ::shutdown(fd, SHUT_WR);
  receiver.join();
  double secs = seconds(Clock::now() - start);
  ::close(fd);
  ::close(listener);
  return mibPerSecond(total, secs);
}

struct MigrationResult {
  double seconds_to_locations = 0;  // DecommissionExecutor -> UpdateBlockInfo with every block
  double seconds_to_exit = 0;       // DecommissionExecutor -> RemoveExecutor
  std::string problem;              // empty: every block arrived intact
};

std::unique_ptr<ChildProcess> startAgent(const fs::path& dir, const std::string& id,
                                         const std::string& driver_url,
                                         const nlohmann::json& config) {
  fs::path config_file = dir / (id + ".json");
  dockhand::testing::writeFile(config_file, config.dump());
  std::vector<std::string> argv = {dockhand::testing::agentBinary(),
                                   "--driver-url",
                                   driver_url,
                                   "--executor-id",
                                   id,
                                   "--app-id",
                                   "migration-bench",
                                   "--cores",
                                   "2",
                                   "--hostname",
                                   "127.0.0.1",
                                   "--work-dir",
                                   (dir / ("work-" + id)).string(),
                                   "--config",
                                   config_file.string(),
                                   "--log-level",
                                   "warn"};
  return std::make_unique<ChildProcess>(argv, (dir / (id + ".log")).string());
}

MigrationResult migrationRate(const Options& o, const std::vector<char>& data) {
  MigrationResult out;
  fs::path source_file = o.dir / "block-source";
  {
    int fd = ::open(source_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    writeAll(fd, data.data(), data.size());
    ::close(fd);
  }
  FakeDriver driver_b;
  auto agent_b = startAgent(o.dir, "b", driver_b.url(), nlohmann::json::object());
  FakeDriver driver_a;
  auto agent_a = startAgent(
      o.dir, "a", driver_a.url(),
      {{"decommission", {{"check_interval_ms", 20}, {"max_concurrent", o.concurrency}}}});
  if (!driver_b.waitForRegistration(30s) || !driver_a.waitForRegistration(30s)) {
    out.problem = "an agent did not register:\n" + agent_a->output() + agent_b->output();
    return out;
  }
  driver_a.setPeers({{"b", driver_b.agentBlockUrl()}});

  // Agent A's blocks: the outputs of one task, stored (checksummed, fsynced) before FINISHED.
  proto::LaunchTask launch;
  launch.task.task_id = 1;
  launch.task.name = "make-blocks";
  launch.task.payload = {{"shell", "i=0; while [ $i -lt " + std::to_string(o.blocks) +
                                       " ]; do cp '" + source_file.string() +
                                       "' \"$DOCKHAND_OUTPUT_DIR/shuffle_0_${i}_0\" || exit 1; " +
                                       "i=$((i+1)); done"}};
  driver_a.send(proto::makeMessage(launch));
  if (!driver_a.waitForStatus(1, proto::TaskState::kFinished, std::chrono::seconds(300))) {
    out.problem = "the task that makes the blocks did not finish:\n" + agent_a->output();
    return out;
  }
  std::map<std::string, proto::BlockInfo> announced;
  for (const auto& frame : driver_a.history()) {
    if (frame.type != "UpdateBlockInfo") continue;
    for (auto& b : proto::decodeBody<proto::UpdateBlockInfo>(frame.body).added) {
      announced[b.id] = b;
    }
  }
  if (announced.size() != static_cast<std::size_t>(o.blocks)) {
    out.problem = "agent a announced " + std::to_string(announced.size()) + " blocks, not " +
                  std::to_string(o.blocks);
    return out;
  }
  ::sync();  // the source blocks' own writeback is not part of the migration

  auto start = Clock::now();
  driver_a.send(proto::makeMessage(proto::DecommissionExecutor{.reason = "migration bench"}));
  auto moved = driver_a.waitFor(
      [](const proto::Envelope& e) {
        return e.type == "UpdateBlockInfo" &&
               !proto::decodeBody<proto::UpdateBlockInfo>(e.body).removed.empty();
      },
      std::chrono::seconds(600));
  out.seconds_to_locations = seconds(Clock::now() - start);
  auto removed = driver_a.waitForType("RemoveExecutor", std::chrono::seconds(60));
  out.seconds_to_exit = seconds(Clock::now() - start);
  auto code = agent_a->waitExit(std::chrono::seconds(30));
  if (!moved || !removed || !code || *code != 0) {
    out.problem = "agent a did not finish its decommission (exit " +
                  (code ? std::to_string(*code) : std::string("none")) + "):\n" + agent_a->output();
    return out;
  }
  auto report = proto::decodeBody<proto::UpdateBlockInfo>(moved->body);
  if (report.added.size() != static_cast<std::size_t>(o.blocks)) {
    out.problem = "the migration report names " + std::to_string(report.added.size()) +
                  " blocks, not " + std::to_string(o.blocks);
    return out;
  }
  for (const auto& b : report.added) {
    auto head = dockhand::testing::httpRequest("HEAD", b.url);
    const int status = head.status;
    const std::string& checksum = head.checksum;
    if (status != 200 || checksum != announced[b.id].checksum) {
      out.problem = "block " + b.id + " at " + b.url + ": HTTP " + std::to_string(status) +
                    ", checksum '" + checksum + "', expected " + announced[b.id].checksum;
      return out;
    }
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  dockhand::bench::noticeSanitizer();
  Options o;
  const char* tmp = std::getenv("TMPDIR");
  fs::path base = tmp != nullptr && *tmp != '\0' ? tmp : "/tmp";
  BenchOptions parser(
      "usage: dockhand-migration-bench [--dir DIR] [--blocks N] [--block-mib M] "
      "[--concurrency C] [--rounds R]");
  parser.path("--dir", base).count("--blocks", o.blocks).count("--block-mib", o.block_mib);
  parser.count("--rounds", o.rounds).count("--concurrency", o.concurrency);
  if (auto exit_code = parser.parse(argc, argv)) return *exit_code;
  o.dir = base / ("dockhand-migration-bench-" + std::to_string(::getpid()));
  fs::create_directories(o.dir);
  try {
    std::vector<char> data = randomBytes(static_cast<std::size_t>(o.block_mib) << 20);
    const auto total_mib = static_cast<double>(o.blocks) * o.block_mib;
    std::printf("migration bench: %d blocks x %d MiB = %.0f MiB in %s, %d at once\n", o.blocks,
                o.block_mib, total_mib, o.dir.c_str(), o.concurrency);
    // Rounds interleave the four measurements (page cache, O_DIRECT, loopback, migration), so
    // that a slow spell of the shared disk or host falls on all of them alike, and each figure
    // keeps its best round: the limit is what the machine can do, and the migration is held
    // to the same rule (one lucky baseline round against a single migration run would not be).
    struct Figure {
      const char* label;
      std::vector<double> rates;
      double best() const { return *std::max_element(rates.begin(), rates.end()); }
    };
    Figure buffered{"disk write, page cache:", {}};
    Figure direct{"disk write, O_DIRECT:", {}};
    Figure loopback{"loopback TCP:", {}};
    Figure migration{"migration, agent to agent:", {}};
    // What the machine allows: the faster way to the disk, or the network if that is slower.
    auto limit_of = [](double page_cache, double o_direct, double tcp) {
      return std::min(std::max(page_cache, o_direct), tcp);
    };
    std::vector<double> round_ratios;
    std::vector<MigrationResult> runs;
    const auto total = static_cast<std::uint64_t>(o.blocks) * data.size();
    for (int r = 0; r < o.rounds; ++r) {
      ::sync();
      buffered.rates.push_back(diskRateBuffered(o, data));
      ::sync();
      direct.rates.push_back(diskRateDirect(o, data));
      loopback.rates.push_back(loopbackRate(o, data));
      ::sync();
      MigrationResult result = migrationRate(o, data);
      if (!result.problem.empty()) {
        std::fprintf(stderr, "migration incomplete (round %d): %s\n", r + 1,
                     result.problem.c_str());
        fs::remove_all(o.dir);
        return 1;
      }
      for (const char* leftover : {"work-a", "work-b", "block-source"}) {
        fs::remove_all(o.dir / leftover);
      }
      migration.rates.push_back(mibPerSecond(total, result.seconds_to_locations));
      runs.push_back(result);
      const double round_limit =
          limit_of(buffered.rates.back(), direct.rates.back(), loopback.rates.back());
      round_ratios.push_back(migration.rates.back() / round_limit);
    }
    for (const Figure* f : {&buffered, &direct, &loopback, &migration}) {
      std::printf("  %-28s", f->label);
      for (double rate : f->rates) std::printf(" %7.1f", rate);
      std::printf("  -> best %.1f MiB/s\n", f->best());
    }
    std::printf(
        "  migration rounds, seconds until the driver knew every new location / until "
        "RemoveExecutor:");
    for (const auto& run : runs) {
      std::printf(" %.2f/%.2f", run.seconds_to_locations, run.seconds_to_exit);
    }
    std::printf("\n  ratio per round vs that round's min(disk, loopback):");
    for (double ratio : round_ratios) std::printf(" %.0f%%", 100.0 * ratio);
    const double limit = limit_of(buffered.best(), direct.best(), loopback.best());
    std::printf(
        "\n  ratio, best migration vs min(best disk, best loopback): %.0f%% (target >= "
        "80%%)\n",
        100.0 * migration.best() / limit);
    std::printf("  every block verified at agent b (HEAD: checksum as announced by agent a)\n");
    fs::remove_all(o.dir);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "migration bench failed: %s\n", e.what());
    fs::remove_all(o.dir);
    return 1;
  }
  return 0;
}
