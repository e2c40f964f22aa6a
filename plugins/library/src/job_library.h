// JobLibrary: one job library (dockhand/job.h), loaded and checked.
//
// open() opens the file once and checks it as the agent checks plugins (a regular file; unless
// allow_insecure, neither it nor its directory writable by group or others, and owned by root
// or this user; the file opened is the one checked), asks the agent's plugin_trust policy
// about the opened file (dh_host.verify_code), loads that descriptor with dlopen(RTLD_NOW |
// RTLD_LOCAL) through its /proc/self/fd name, calls dh_job_entry and checks the descriptor (ABI
// major equal, minor not newer, required fields, valid and unique function names) before any
// task function is called. A worker process gets the checked descriptor over its channel and
// loads it with load().
//
// Lifetime: the library stays loaded while the JobLibrary lives; each running task holds a
// shared_ptr to its library, so a library is unloaded only after every task function of it
// has returned (a task thread left running after a kill keeps it loaded for good).
// Immutable after open(); safe to share between threads.
#pragma once

#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "dockhand/job.h"

namespace dockhand::plugins::library {

// Why a job library was refused: "job library '<path>': <reason>".
class LibraryRefused : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Asks the agent whether the file open as `fd` (named `path`) may load as code: "" when it
// may, else why not (Host::verifyCode). Empty: every file may.
using CodeVerifier = std::function<std::string(int fd, const std::string& path)>;

// A job library's file, opened and checked (JobLibrary::openFile), for a worker process to
// load: the runner keeps one per path, as it keeps one JobLibrary per path on threads.
// Closed with its last owner.
class LibraryFile {
 public:
  explicit LibraryFile(int fd) : fd_(fd) {}
  ~LibraryFile();
  LibraryFile(const LibraryFile&) = delete;
  LibraryFile& operator=(const LibraryFile&) = delete;
  int fd() const { return fd_; }

 private:
  int fd_;
};

class JobLibrary {
 public:
  // openFile() then load(). Throws LibraryRefused.
  static std::shared_ptr<JobLibrary> open(const std::string& path, bool allow_insecure,
                                          const CodeVerifier& verify);
  // Opens `path` once and makes every check on the opened file (checkFile's, that it is the
  // file the path named when checked, `verify`): the descriptor to load (O_CLOEXEC, the
  // caller's to close or hand to load()). Throws LibraryRefused.
  static int openFile(const std::string& path, bool allow_insecure, const CodeVerifier& verify);
  // Loads the file open as `fd`, which it takes (kept open while the library is loaded, so
  // its /proc/self/fd name stays its own; closed on a refusal), and checks its descriptor.
  // `path` names it in messages. Throws LibraryRefused.
  static std::shared_ptr<JobLibrary> load(int fd, const std::string& path);
  // The file checks of open(), without loading: throws LibraryRefused.
  static void checkFile(const std::string& path, bool allow_insecure);
  // Unloads the library and closes its descriptor, unless the loader kept the library mapped
  // (it cannot unload one with GNU unique symbols): then the descriptor stays open for the
  // process's life, so that its /proc/self/fd name never comes to mean another file.
  ~JobLibrary();
  JobLibrary(const JobLibrary&) = delete;
  JobLibrary& operator=(const JobLibrary&) = delete;

  const std::string& path() const { return path_; }
  const std::string& name() const { return name_; }
  const std::string& version() const { return version_; }
  // The task function called `function`, or nullptr.
  dh_task_fn find(const std::string& function) const;
  // "a, b, c": the library's function names, for messages.
  std::string functionNames() const;
  // The task functions, in the descriptor's order.
  const std::vector<std::pair<std::string, dh_task_fn>>& functions() const { return functions_; }
  // "major.minor" of the job ABI the library was built against.
  const std::string& abi() const { return abi_; }

 private:
  JobLibrary() = default;
  void* handle_ = nullptr;
  int fd_ = -1;
  std::string path_;
  std::string name_;
  std::string version_;
  std::string abi_;
  std::vector<std::pair<std::string, dh_task_fn>> functions_;
};

}  // namespace dockhand::plugins::library
