#include "dockhand/driver/local_agents.h"

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <deque>
#include <fstream>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>

#include "dockhand/base/child_spawn.h"

namespace dockhand::driver {

LocalAgents::LocalAgents(LocalAgentOptions options) : options_(std::move(options)) {}

LocalAgents::~LocalAgents() {
  if (reap() > 0) {
    signalRunning(SIGKILL);
    waitAllExited(std::chrono::seconds(5));
  }
}

void LocalAgents::start() {
  for (int i = 1; i <= options_.count; ++i) {
    LocalAgent agent;
    agent.id = fmt::format("agent-{}", i);
    agent.work_dir = fmt::format("{}/{}", options_.base_dir, agent.id);
    agent.log_path = fmt::format("{}/{}.log", options_.base_dir, agent.id);
    if (::mkdir(agent.work_dir.c_str(), 0700) != 0 && errno != EEXIST) {
      throw std::runtime_error(
          fmt::format("cannot create work dir {}: {}", agent.work_dir, std::strerror(errno)));
    }
    std::vector<std::string> args = {
        options_.agent_bin, "--driver-url", options_.driver_url,
        "--executor-id",    agent.id,       "--app-id",
        options_.app_id,    "--cores",      std::to_string(options_.cores),
        "--hostname",       "127.0.0.1",    "--work-dir",
        agent.work_dir,     "--log-level",  options_.log_level};
    if (!options_.config_file.empty()) {
      args.insert(args.begin() + 1, {"--config", options_.config_file});
    }
    if (!options_.tls_config_file.empty()) {
      args.insert(args.begin() + 1, {"--config", options_.tls_config_file});
    }
    if (!options_.auth_secret_file.empty()) {
      args.insert(args.end(), {"--auth-secret-file", options_.auth_secret_file});
    }
    if (!options_.log_format.empty()) {
      args.insert(args.end(), {"--log-format", options_.log_format});
    }
    // Its own process group (a terminal's Ctrl-C reaches the driver, which stops the agents
    // in order), no blocked signal, default dispositions; stdout and stderr into its log; the
    // driver's sockets (the listening one included) closed.
    ChildSpawn child;
    child.ownProcessGroup().cleanSignals().stdinFromNull();
    child.open(1, agent.log_path, ChildSpawn::kTruncate).dup(1, 2).closeFrom(3);
    Result<pid_t> pid = child.start(args);
    if (!pid) throw std::runtime_error(fmt::format("{}: {}", agent.id, pid.error().message));
    agent.pid = *pid;
    agents_.push_back(std::move(agent));
  }
}

std::size_t LocalAgents::reap() {
  std::size_t alive = 0;
  for (auto& agent : agents_) {
    if (agent.exited || agent.pid <= 0) continue;
    int status = 0;
    pid_t r = ::waitpid(agent.pid, &status, WNOHANG);
    if (r == agent.pid) {
      agent.exited = true;
      agent.wait_status = status;
    } else if (r < 0 && errno == ECHILD) {
      agent.exited = true;
    } else {
      ++alive;
    }
  }
  return alive;
}

bool LocalAgents::waitAllExited(std::chrono::milliseconds timeout) {
  // Shutdown path only: a short bounded poll of our own children.
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (reap() > 0) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

void LocalAgents::signalRunning(int signal) {
  for (const auto& agent : agents_) {
    if (!agent.exited && agent.pid > 0) ::kill(agent.pid, signal);
  }
}

std::vector<std::string> LocalAgents::stop(std::chrono::milliseconds grace) {
  std::vector<std::string> killed;
  if (waitAllExited(grace)) return killed;
  for (const auto& agent : agents_) {
    if (!agent.exited) killed.push_back(agent.id);
  }
  signalRunning(SIGTERM);
  if (!waitAllExited(std::chrono::seconds(2))) {
    signalRunning(SIGKILL);
    waitAllExited(std::chrono::seconds(5));
  }
  return killed;
}

std::string LocalAgents::describeExit(const LocalAgent& agent) {
  if (!agent.exited) return "running";
  if (WIFEXITED(agent.wait_status))
    return fmt::format("exit code {}", WEXITSTATUS(agent.wait_status));
  if (WIFSIGNALED(agent.wait_status)) {
    return fmt::format("killed by signal {}", WTERMSIG(agent.wait_status));
  }
  return "exited";
}

std::string LocalAgents::tail(const std::string& path, std::size_t lines) {
  std::ifstream in(path);
  if (!in) return {};
  std::deque<std::string> last;
  std::string line;
  while (std::getline(in, line)) {
    last.push_back(std::move(line));
    if (last.size() > lines) last.pop_front();
  }
  std::string out;
  for (const auto& l : last) out += l + "\n";
  return out;
}

}  // namespace dockhand::driver
