// TmpfsMount: a small tmpfs mounted on a directory for the life of the object, so that a test
// can fill a disk for real (or a ramfs, which has no size limit and refuses O_DIRECT). Mounting
// needs root (or CAP_SYS_ADMIN); where it is refused, `error()` says why and the test skips
// itself.
#pragma once

#include <sys/mount.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>
#include <utility>

namespace dockhand::testing {

class TmpfsMount {
 public:
  // `bytes` is the size of a tmpfs; a ramfs ignores it.
  TmpfsMount(std::filesystem::path dir, std::size_t bytes, const std::string& type = "tmpfs")
      : dir_(std::move(dir)) {
    std::error_code ec;
    std::filesystem::create_directories(dir_, ec);
    std::string options = "mode=0755";
    if (type == "tmpfs") options += ",size=" + std::to_string(bytes);
    if (::mount(type.c_str(), dir_.c_str(), type.c_str(), MS_NOSUID | MS_NODEV, options.c_str()) !=
        0) {
      error_ = "cannot mount a " + type + " on " + dir_.string() + ": " + std::strerror(errno);
    } else {
      mounted_ = true;
    }
  }
  ~TmpfsMount() {
    // Lazy: a process that still has a file open there does not keep the mount alive.
    if (mounted_) ::umount2(dir_.c_str(), MNT_DETACH);
  }
  TmpfsMount(const TmpfsMount&) = delete;
  TmpfsMount& operator=(const TmpfsMount&) = delete;

  bool mounted() const { return mounted_; }
  const std::string& error() const { return error_; }

 private:
  std::filesystem::path dir_;
  bool mounted_ = false;
  std::string error_;
};

}  // namespace dockhand::testing
