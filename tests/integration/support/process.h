// Test support: child processes and temporary directories for integration tests.
//
// Each test owns what it starts: a ChildProcess is killed (SIGKILL) and reaped when it goes
// out of scope, a TempDir is removed. Every wait takes a deadline.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace dockhand::testing {

using Millis = std::chrono::milliseconds;

class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::string str() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

class ChildProcess {
 public:
  // Starts argv[0] (a path) with stdout and stderr appended to `log_path`, stdin /dev/null.
  // `env` entries ("K=V") are added to this process's environment.
  ChildProcess(const std::vector<std::string>& argv, const std::string& log_path,
               const std::vector<std::string>& env = {});
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }
  // The exit code (128 + signal when killed by one), or nullopt if still running at the deadline.
  std::optional<int> waitExit(Millis timeout);
  bool running();
  void signal(int sig);
  // What the process wrote so far.
  std::string output() const;

 private:
  pid_t pid_ = -1;
  std::optional<int> exit_code_;
  std::string log_path_;
};

// Polls `condition` every few milliseconds until it holds or `timeout` passes.
bool waitUntil(const std::function<bool()>& condition, Millis timeout);

// True when no process exists with that pid (or it is a zombie of another parent).
bool processGone(pid_t pid);

std::string readFile(const std::filesystem::path& path);
void writeFile(const std::filesystem::path& path, const std::string& text);
// The lines of `text` that start with `prefix` (a driver's task lines, say), in order.
std::vector<std::string> linesStartingWith(const std::string& text, const std::string& prefix);
// Whether `part` occurs in `text`, and how many times (overlaps counted).
bool contains(const std::string& text, const std::string& part);
std::size_t count(const std::string& text, const std::string& part);

// Paths of the built programs.
std::string agentBinary();
std::string driverBinary();

// Starts `dockhand-driver serve --listen 127.0.0.1:0 --port-file PORT_FILE EXTRA...` logging to
// `log`, and waits up to 10 s for the port it writes there. `port` is that port, or 0 when
// none came (the caller checks).
std::unique_ptr<ChildProcess> startServingDriver(const std::vector<std::string>& extra,
                                                 const std::filesystem::path& port_file,
                                                 const std::filesystem::path& log, int& port);
// The same for `dockhand-driver run JOB --local-agents 0 ...`: a job for agents the test starts.
std::unique_ptr<ChildProcess> startJobDriver(const std::filesystem::path& job,
                                             const std::vector<std::string>& extra,
                                             const std::filesystem::path& port_file,
                                             const std::filesystem::path& log, int& port);

// A TCP port on 127.0.0.1 that nothing listens on right now.
int unusedPort();

}  // namespace dockhand::testing
