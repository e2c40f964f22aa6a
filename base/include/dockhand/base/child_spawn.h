// ChildSpawn: the one way this project starts a child process with posix_spawn (the driver's
// local agents, the process runner's tasks, the library runner's worker processes, the
// plugins' bounded scripts, the bench's and tests' children). It owns posix_spawn's attribute
// and file-action objects, destroyed on every path, and keeps the first failure of the set-up
// to report it from start(), so a caller writes what the child gets and checks one Result:
//
//   ChildSpawn child;
//   child.ownProcessGroup().cleanSignals().stdinFromNull().open(1, log, kTruncate).dup(1, 2);
//   Result<pid_t> pid = child.start(args);
//
// Header-only and free of spdlog and Poco (dockhand_result), so the plugins' code may use it.
// One object starts one child from one thread; it is not shared.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include "dockhand/base/result.h"

namespace dockhand {

class ChildSpawn {
 public:
  static constexpr int kTruncate = O_WRONLY | O_CREAT | O_TRUNC;
  static constexpr int kAppend = O_WRONLY | O_CREAT | O_APPEND;

  ChildSpawn() {
    ::posix_spawnattr_init(&attr_);
    ::posix_spawn_file_actions_init(&actions_);
  }
  ~ChildSpawn() {
    ::posix_spawn_file_actions_destroy(&actions_);
    ::posix_spawnattr_destroy(&attr_);
  }
  ChildSpawn(const ChildSpawn&) = delete;
  ChildSpawn& operator=(const ChildSpawn&) = delete;

  // The child leads a process group of its own: a terminal's Ctrl-C reaches only this
  // process, which ends the child in order, and a signal to the group reaches what the child
  // starts.
  ChildSpawn& ownProcessGroup() {
    flags_ |= POSIX_SPAWN_SETPGROUP;
    return note(::posix_spawnattr_setpgroup(&attr_, 0), "posix_spawnattr_setpgroup");
  }

  // No signal blocked in the child and every signal's action the default, whatever the
  // calling thread blocks and this process ignores (an ignored SIGPIPE would outlive exec).
  ChildSpawn& cleanSignals() {
    sigset_t all;
    sigset_t none;
    ::sigfillset(&all);
    ::sigemptyset(&none);
    flags_ |= POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF;
    note(::posix_spawnattr_setsigdefault(&attr_, &all), "posix_spawnattr_setsigdefault");
    return note(::posix_spawnattr_setsigmask(&attr_, &none), "posix_spawnattr_setsigmask");
  }

  ChildSpawn& stdinFromNull() { return open(0, "/dev/null", O_RDONLY); }

  // The child's `fd` opened on `path` (kTruncate or kAppend to write; created 0644).
  ChildSpawn& open(int fd, const std::string& path, int flags, mode_t mode = 0644) {
    return note(::posix_spawn_file_actions_addopen(&actions_, fd, path.c_str(), flags, mode),
                "posix_spawn_file_actions_addopen");
  }

  // The child's `to` is a copy of `from` (this process's, or one an earlier action opened).
  ChildSpawn& dup(int from, int to) {
    return note(::posix_spawn_file_actions_adddup2(&actions_, from, to),
                "posix_spawn_file_actions_adddup2");
  }

  // Every descriptor from `first` up closed in the child: none of this process's sockets
  // leak into it, close-on-exec or not.
  ChildSpawn& closeFrom(int first) {
    return note(::posix_spawn_file_actions_addclosefrom_np(&actions_, first),
                "posix_spawn_file_actions_addclosefrom_np");
  }

  // The child starts in `dir`.
  ChildSpawn& chdir(const std::string& dir) {
    return note(::posix_spawn_file_actions_addchdir_np(&actions_, dir.c_str()),
                "posix_spawn_file_actions_addchdir_np");
  }

  // Starts `program` with `argv` (NULL-terminated) and `envp` (this process's environment
  // when null); `search_path` looks a name without '/' up in PATH as execvp does. The child's
  // pid, or why it did not start: "cannot start '<program>': <reason>".
  Result<pid_t> start(const char* program, char* const* argv, char* const* envp = nullptr,
                      bool search_path = false) {
    if (!failure_.empty()) return Error("cannot start '" + std::string(program) + "': " + failure_);
    if (flags_ != 0) {
      if (const int rc = ::posix_spawnattr_setflags(&attr_, flags_); rc != 0) {
        return Error("cannot start '" + std::string(program) +
                     "': posix_spawnattr_setflags: " + reason(rc));
      }
    }
    char* const* env = envp != nullptr ? envp : environ;
    pid_t pid = -1;
    const int rc = search_path ? ::posix_spawnp(&pid, program, &actions_, &attr_, argv, env)
                               : ::posix_spawn(&pid, program, &actions_, &attr_, argv, env);
    if (rc != 0) return Error("cannot start '" + std::string(program) + "': " + reason(rc));
    return pid;
  }

  // As above, the program being args[0].
  Result<pid_t> start(const std::vector<std::string>& args, char* const* envp = nullptr,
                      bool search_path = false) {
    if (args.empty()) return Error("cannot start a child: no program given");
    std::vector<char*> argv;
    argv.reserve(args.size() + 1);
    // posix_spawn takes char* const* for historical reasons; it does not write through them.
    for (const auto& arg : args) argv.push_back(const_cast<char*>(arg.c_str()));  // NOLINT
    argv.push_back(nullptr);
    return start(argv[0], argv.data(), envp, search_path);
  }

 private:
  ChildSpawn& note(int rc, const char* what) {
    if (rc != 0 && failure_.empty()) failure_ = std::string(what) + ": " + reason(rc);
    return *this;
  }

  static std::string reason(int error) {
    char buffer[128];
    // GNU strerror_r: thread-safe, returns the text (in buffer or a static string).
    return ::strerror_r(error, buffer, sizeof buffer);
  }

  posix_spawnattr_t attr_{};
  posix_spawn_file_actions_t actions_{};
  short flags_ = 0;
  std::string failure_;
};

}  // namespace dockhand
