// dockhand-migration-bench: how fast a decommissioning agent moves its blocks to a peer,
// against the two limits of the machine it runs on.
//
//   dockhand-migration-bench [--dir DIR] [--blocks N] [--block-mib M] [--concurrency C]
//
// In one run, on one file system (DIR, default $TMPDIR or /tmp):
//   1. disk:      N files of M MiB written and fsynced, C at once (a durable copy at best);
//   2. loopback:  N x M MiB sent over one TCP connection on 127.0.0.1;
//   3. migration: N blocks of M MiB moved by the `peer` plugin (HTTP PUT, sendfile) into a
//                 BlockServer + BlockStore on 127.0.0.1: received, checksummed, fsynced and
//                 renamed at the destination, exactly as between two agents.
// It prints the three rates and migration / min(disk, loopback). Default: 64 x 16 MiB = 1 GiB.
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "blocks/block_server.h"
#include "blocks/block_store.h"
#include "plugins/plugin_host.h"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using dockhand::agent::BlockServer;
using dockhand::agent::BlockServerOptions;
using dockhand::agent::BlockStore;

struct Options {
  fs::path dir;
  int blocks = 64;
  int block_mib = 16;
  int concurrency = 4;
};

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }
double mibPerSecond(std::uint64_t bytes, double secs) { return bytes / secs / (1 << 20); }

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
double diskRate(const Options& o, const std::vector<char>& data) {
  fs::path dir = o.dir / "disk";
  fs::create_directories(dir);
  auto start = Clock::now();
  std::vector<std::thread> writers;
  for (int t = 0; t < o.concurrency; ++t) {
    writers.emplace_back([&, t] {
      for (int i = t; i < o.blocks; i += o.concurrency) {
        fs::path temp = dir / ("tmp-" + std::to_string(i));
        int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        writeAll(fd, data.data(), data.size());
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

// The same bytes over one TCP connection on loopback, read and dropped by the receiver.
double loopbackRate(const Options& o, const std::vector<char>& data) {
  int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  ::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len);
  ::listen(listener, 1);
  const std::uint64_t total = static_cast<std::uint64_t>(o.blocks) * data.size();
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
  ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
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

double migrationRate(const Options& o, const std::vector<char>& data, std::string& problem) {
  BlockStore source(o.dir / "source");
  BlockStore destination(o.dir / "destination");
  nlohmann::json blocks = nlohmann::json::array();
  for (int i = 0; i < o.blocks; ++i) {
    std::string id = "shuffle_0_" + std::to_string(i) + "_0";
    auto writer = source.create(id);
    writer->write(data.data(), data.size());
    auto meta = writer->commit();
    blocks.push_back({{"id", id},
                      {"path", source.pathOf(id).string()},
                      {"size", meta.size},
                      {"checksum", meta.checksum}});
  }
  BlockServerOptions server_options;
  server_options.max_threads = o.concurrency + 4;
  BlockServer server(server_options, destination, nullptr);
  server.start();
  dockhand::agent::PluginHost host({DOCKHAND_PLUGIN_DIR});
  auto peer = host.createBlockMigration(
      "peer", nlohmann::json{{"max_concurrent", o.concurrency}}.dump(), [](std::string_view) {});
  nlohmann::json request{{"blocks", blocks},
                         {"peers",
                          {{{"executor_id", "destination"},
                            {"block_url", "http://127.0.0.1:" + std::to_string(server.port())}}}}};
  auto start = Clock::now();
  auto result = peer->migrate(request.dump());
  double secs = seconds(Clock::now() - start);
  if (!result.ok()) {
    problem = result.error;
  } else {
    auto out = nlohmann::json::parse(result.json);
    if (out["migrated"].size() != static_cast<std::size_t>(o.blocks) ||
        destination.count() != static_cast<std::size_t>(o.blocks)) {
      problem = "only " + std::to_string(out["migrated"].size()) +
                " blocks migrated: " + out["failed"].dump();
    }
  }
  server.stop();
  return mibPerSecond(static_cast<std::uint64_t>(o.blocks) * data.size(), secs);
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  const char* tmp = std::getenv("TMPDIR");
  fs::path base = tmp != nullptr && *tmp != '\0' ? tmp : "/tmp";
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    if (flag == "--dir") {
      base = argv[i + 1];
    } else if (flag == "--blocks") {
      o.blocks = std::max(1, std::atoi(argv[i + 1]));
    } else if (flag == "--block-mib") {
      o.block_mib = std::max(1, std::atoi(argv[i + 1]));
    } else if (flag == "--concurrency") {
      o.concurrency = std::max(1, std::atoi(argv[i + 1]));
    } else {
      std::fprintf(stderr, "usage: %s [--dir DIR] [--blocks N] [--block-mib M] [--concurrency C]\n",
                   argv[0]);
      return 64;
    }
  }
  o.dir = base / ("dockhand-migration-bench-" + std::to_string(::getpid()));
  fs::create_directories(o.dir);
  try {
    std::vector<char> data = randomBytes(static_cast<std::size_t>(o.block_mib) << 20);
    const double total_mib = static_cast<double>(o.blocks) * o.block_mib;
    std::printf("migration bench: %d blocks x %d MiB = %.0f MiB in %s, %d at once\n", o.blocks,
                o.block_mib, total_mib, o.dir.c_str(), o.concurrency);
    double disk = diskRate(o, data);
    std::printf("  disk write, fsynced:      %8.1f MiB/s\n", disk);
    double loopback = loopbackRate(o, data);
    std::printf("  loopback TCP:             %8.1f MiB/s\n", loopback);
    std::string problem;
    double migration = migrationRate(o, data, problem);
    std::printf("  migration (peer plugin):  %8.1f MiB/s\n", migration);
    double limit = std::min(disk, loopback);
    std::printf("  ratio vs min(disk, loopback): %.0f%% (target >= 80%%)\n",
                100.0 * migration / limit);
    fs::remove_all(o.dir);
    if (!problem.empty()) {
      std::fprintf(stderr, "migration incomplete: %s\n", problem.c_str());
      return 1;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "migration bench failed: %s\n", e.what());
    fs::remove_all(o.dir);
    return 1;
  }
  return 0;
}
