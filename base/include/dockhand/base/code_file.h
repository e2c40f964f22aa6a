// The checks made before a file is loaded as code (a plugin, a job library), written once for
// the agent's plugin host (agent/plugins/plugin_library.cpp) and the library runner
// (plugins/library/src/job_library.cpp): who may have written it, and that the file opened is
// the file checked. Header-only, like the rest of dockhand_result: plugins use it too.
#pragma once

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <string_view>
#include <system_error>

#include "dockhand/base/result.h"

namespace dockhand {

namespace code_file_detail {

// Why `path` (a file or directory, `what`) may not be trusted, or "".
inline std::string insecurity(const std::filesystem::path& path, std::string_view what,
                              std::string_view lift) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return {};  // a missing file is reported by the caller
  const std::string name = std::string(what) + " " + path.string();
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode) & 07777U);
    return name + " is writable by group or others (mode " + mode +
           "); run chmod go-w on it, or set " + std::string(lift) + " for development";
  }
  if (st.st_uid != 0 && st.st_uid != ::geteuid()) {
    return name + " belongs to uid " + std::to_string(st.st_uid) +
           ", neither root nor this agent's user; chown it, or set " + std::string(lift) +
           " for development";
  }
  return {};
}

}  // namespace code_file_detail

// Success when `path` and its directory are owned by root or this process's user and not
// writable by group or others; otherwise why not, with the mend (`lift` names the setting
// that lifts the check: "allow_insecure_plugins"). A path that does not exist passes: the
// caller says so in its own words.
inline Result<void> checkCodeFileSecurity(const std::filesystem::path& path,
                                          std::string_view lift) {
  std::error_code ec;
  std::filesystem::path absolute = std::filesystem::absolute(path, ec);
  if (ec) absolute = path;
  std::string why = code_file_detail::insecurity(absolute, "file", lift);
  if (why.empty()) why = code_file_detail::insecurity(absolute.parent_path(), "directory", lift);
  if (!why.empty()) return Error(std::move(why));
  return {};
}

// Success when the open file `fd` is still the one `path` names: nothing renamed another file
// over the path between its open and its checks.
inline Result<void> checkSameFile(int fd, const std::filesystem::path& path) {
  struct stat opened {};
  struct stat named {};
  if (::fstat(fd, &opened) != 0 || ::stat(path.c_str(), &named) != 0 ||
      opened.st_ino != named.st_ino || opened.st_dev != named.st_dev) {
    return Error("the file was replaced while it was being checked");
  }
  return {};
}

}  // namespace dockhand
