#include "dockhand/driver/cli_setup.h"

#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdint>

#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <system_error>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "dockhand/base/logging.h"

namespace dockhand::driver {
namespace {

sigset_t watchedSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  return set;
}

}  // namespace

void SignalWatcher::blockInThisThread() {
  sigset_t set = watchedSignals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  ::signal(SIGPIPE, SIG_IGN);
}

SignalWatcher::SignalWatcher(std::function<void(int)> on_signal)
    : on_signal_(std::move(on_signal)) {
  const sigset_t set = watchedSignals();
  signal_fd_ = ::signalfd(-1, &set, SFD_CLOEXEC);
  stop_fd_ = ::eventfd(0, EFD_CLOEXEC);
  if (signal_fd_ < 0 || stop_fd_ < 0) {
    const int error = errno;
    if (signal_fd_ >= 0) ::close(signal_fd_);
    if (stop_fd_ >= 0) ::close(stop_fd_);
    throw std::system_error(error, std::generic_category(), "cannot watch SIGINT and SIGTERM");
  }
  thread_ = std::thread([this] { loop(); });
}

SignalWatcher::~SignalWatcher() {
  const std::uint64_t one = 1;
  while (::write(stop_fd_, &one, sizeof one) < 0 && errno == EINTR) {
  }
  thread_.join();
  ::close(signal_fd_);
  ::close(stop_fd_);
}

void SignalWatcher::loop() {
  for (;;) {
    std::array<pollfd, 2> fds{pollfd{.fd = signal_fd_, .events = POLLIN, .revents = 0},
                              pollfd{.fd = stop_fd_, .events = POLLIN, .revents = 0}};
    if (::poll(fds.data(), fds.size(), -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (fds[1].revents != 0) return;
    signalfd_siginfo info{};
    if (::read(signal_fd_, &info, sizeof info) != static_cast<ssize_t>(sizeof info)) continue;
    const int sig = static_cast<int>(info.ssi_signo);
    received_.store(sig);
    on_signal_(sig);
  }
}

void raiseOpenFileLimit(const DriverConfig& config) {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return;
  if (limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    if (::setrlimit(RLIMIT_NOFILE, &limit) != 0) ::getrlimit(RLIMIT_NOFILE, &limit);
  }
  // A connection per agent, plus the control API's and the process's own files.
  const auto wanted = static_cast<rlim_t>(config.server_threads) + 64;
  if (limit.rlim_cur != RLIM_INFINITY && limit.rlim_cur < wanted) {
    logger("driver")->warn(
        "open-file limit {} is below the {} that server_threads={} agents need: agents beyond it "
        "cannot connect (raise LimitNOFILE= or ulimit -n)",
        limit.rlim_cur, wanted, config.server_threads);
  }
}

DriverConfig loadConfig(const CliOptions& o) {
  DriverConfig config = o.config_file.empty() ? DriverConfig{} : loadDriverConfig(o.config_file);
  if (!o.auth_secret_file.empty()) config.auth_secret_file = o.auth_secret_file;
  if (o.launch_ahead) config.launch_ahead = *o.launch_ahead;
  loadClusterSecret(config);
  loadTlsContexts(config);
  return config;
}

std::unique_ptr<EventLog> openEventLog(const CliOptions& options) {
  if (options.event_log.empty()) return nullptr;
  auto log = EventLog::open(options.event_log);
  if (!log) throw std::runtime_error("--event-log: " + log.error().message);
  return std::move(log.value());
}

void writePortFile(const std::string& path, std::uint16_t port) {
  namespace fs = std::filesystem;
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

}  // namespace dockhand::driver
