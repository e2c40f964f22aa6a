#include "support/process.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "dockhand/base/child_spawn.h"

namespace dockhand::testing {

TempDir::TempDir() {
  std::string pattern = (std::filesystem::temp_directory_path() / "dockhand-test-XXXXXX").string();
  if (mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  path_ = pattern;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

ChildProcess::ChildProcess(const std::vector<std::string>& argv, const std::string& log_path,
                           const std::vector<std::string>& env)
    : log_path_(log_path) {
  std::vector<std::string> environment;
  for (char** e = environ; *e != nullptr; ++e) environment.emplace_back(*e);
  for (const auto& extra : env) environment.push_back(extra);
  std::vector<char*> envp;
  envp.reserve(environment.size() + 1);
  for (auto& e : environment) envp.push_back(e.data());
  envp.push_back(nullptr);
  ChildSpawn child;
  child.cleanSignals().stdinFromNull().open(1, log_path, ChildSpawn::kAppend).dup(1, 2);
  const Result<pid_t> pid = child.start(argv, envp.data());
  if (!pid) throw std::runtime_error(pid.error().message);
  pid_ = *pid;
}

ChildProcess::~ChildProcess() {
  if (pid_ > 0 && !exit_code_) {
    ::kill(pid_, SIGKILL);
    int status = 0;
    waitpid(pid_, &status, 0);
  }
}

std::optional<int> ChildProcess::waitExit(Millis timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!exit_code_) {
    int status = 0;
    pid_t r = waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      break;
    }
    if (std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(Millis(5));
  }
  return exit_code_;
}

bool ChildProcess::running() { return !waitExit(Millis(0)).has_value(); }

void ChildProcess::signal(int sig) {
  if (!exit_code_) ::kill(pid_, sig);
}

std::string ChildProcess::output() const { return readFile(log_path_); }

bool waitUntil(const std::function<bool()>& condition, Millis timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    if (condition()) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(Millis(5));
  }
}

bool processGone(pid_t pid) {
  if (::kill(pid, 0) != 0) return errno == ESRCH;
  // A zombie (exited, not yet reaped by its parent) no longer runs.
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string content((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  auto close = content.rfind(')');
  return close != std::string::npos && close + 2 < content.size() && content[close + 2] == 'Z';
}

std::string readFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

void writeFile(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

std::size_t count(const std::string& text, const std::string& part) {
  std::size_t n = 0;
  for (auto at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

std::vector<std::string> linesStartingWith(const std::string& text, const std::string& prefix) {
  std::vector<std::string> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(prefix, 0) == 0) out.push_back(line);
  }
  return out;
}

std::string agentBinary() { return std::string(DOCKHAND_BIN_DIR) + "/dockhand"; }
std::string driverBinary() { return std::string(DOCKHAND_BIN_DIR) + "/dockhand-driver"; }

namespace {

// dockhand-driver ARGS --listen 127.0.0.1:0 --port-file PORT_FILE EXTRA..., and its port.
std::unique_ptr<ChildProcess> startDriverWith(std::vector<std::string> argv,
                                              const std::vector<std::string>& extra,
                                              const std::filesystem::path& port_file,
                                              const std::filesystem::path& log, int& port) {
  argv.insert(argv.begin(), driverBinary());
  for (const char* arg : {"--listen", "127.0.0.1:0", "--port-file"}) argv.emplace_back(arg);
  argv.push_back(port_file.string());
  argv.insert(argv.end(), extra.begin(), extra.end());
  auto driver = std::make_unique<ChildProcess>(argv, log.string());
  const bool written =
      waitUntil([&] { return std::filesystem::exists(port_file) && !readFile(port_file).empty(); },
                std::chrono::seconds(10));
  port = written ? std::stoi(readFile(port_file)) : 0;
  return driver;
}

}  // namespace

std::unique_ptr<ChildProcess> startServingDriver(const std::vector<std::string>& extra,
                                                 const std::filesystem::path& port_file,
                                                 const std::filesystem::path& log, int& port) {
  return startDriverWith({"serve"}, extra, port_file, log, port);
}

std::unique_ptr<ChildProcess> startJobDriver(const std::filesystem::path& job,
                                             const std::vector<std::string>& extra,
                                             const std::filesystem::path& port_file,
                                             const std::filesystem::path& log, int& port) {
  return startDriverWith({"run", job.string(), "--local-agents", "0"}, extra, port_file, log, port);
}

int unusedPort() {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    const int error = errno;
    ::close(fd);
    throw std::runtime_error(std::string("bind to a free loopback port: ") + std::strerror(error));
  }
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

}  // namespace dockhand::testing
