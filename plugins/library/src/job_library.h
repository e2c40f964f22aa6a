// JobLibrary: one job library (dockhand/job.h), loaded and checked.
//
// open() checks the file as the agent checks plugins (a regular file; unless allow_insecure,
// neither it nor its directory writable by group or others, and owned by root or this user),
// loads it with dlopen(RTLD_NOW | RTLD_LOCAL), calls dh_job_entry and checks the descriptor
// (ABI major equal, minor not newer, required fields, valid and unique function names) before
// any task function is called.
//
// Lifetime: the library stays loaded while the JobLibrary lives; each running task holds a
// shared_ptr to its library, so a library is unloaded only after every task function of it
// has returned (a task thread left running after a kill keeps it loaded for good).
// Immutable after open(); safe to share between threads.
#pragma once

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

class JobLibrary {
 public:
  // Throws LibraryRefused.
  static std::shared_ptr<JobLibrary> open(const std::string& path, bool allow_insecure);
  // The file checks of open(), without loading: throws LibraryRefused.
  static void checkFile(const std::string& path, bool allow_insecure);
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

 private:
  JobLibrary() = default;
  void* handle_ = nullptr;
  std::string path_;
  std::string name_;
  std::string version_;
  std::vector<std::pair<std::string, dh_task_fn>> functions_;
};

}  // namespace dockhand::plugins::library
