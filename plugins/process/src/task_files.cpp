#include "task_files.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <string_view>

#include "errno_text.h"

namespace dockhand::plugins::process {

bool isDirectory(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

std::string chownTree(const std::string& dir, uid_t uid, gid_t gid,
                      std::optional<uid_t> only_from) {
  std::string failure;
  auto note = [&](const std::string& what, int error) {
    if (failure.empty()) failure = what + ": " + errnoText(error);
  };
  // Recursion over directory descriptors: names are resolved relative to an open directory
  // and never through a symbolic link, so a task cannot redirect the walk elsewhere.
  auto walk = [&](auto& self, int fd, const std::string& shown, int depth) -> void {
    struct stat st {};
    if (::fstat(fd, &st) != 0) return note(shown, errno);
    if ((!only_from || st.st_uid == *only_from) && ::fchown(fd, uid, gid) != 0) {
      note(shown, errno);
    }
    if (depth >= 128) return note(shown, ELOOP);
    int copy = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (copy < 0) return note(shown, errno);
    DIR* listing = ::fdopendir(copy);
    if (!listing) {
      ::close(copy);
      return note(shown, errno);
    }
    while (dirent* entry = ::readdir(listing)) {
      std::string_view name = entry->d_name;
      if (name == "." || name == "..") continue;
      const std::string path = shown + "/" + std::string(name);
      struct stat child {};
      if (::fstatat(fd, entry->d_name, &child, AT_SYMLINK_NOFOLLOW) != 0) {
        note(path, errno);
        continue;
      }
      if (S_ISDIR(child.st_mode)) {
        int sub = ::openat(fd, entry->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (sub < 0) {
          note(path, errno);
          continue;
        }
        self(self, sub, path, depth + 1);
        ::close(sub);
      } else if ((!only_from || child.st_uid == *only_from) &&
                 ::fchownat(fd, entry->d_name, uid, gid, AT_SYMLINK_NOFOLLOW) != 0) {
        note(path, errno);
      }
    }
    ::closedir(listing);
  };
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return dir + ": " + errnoText(errno);
  walk(walk, fd, dir, 0);
  ::close(fd);
  return failure;
}

std::pair<std::string, std::uint64_t> readPart(const std::string& path, std::size_t limit,
                                               bool tail) {
  // A task may replace its stdout with a link to a file only the agent can read, or with a
  // FIFO that would block the open: links are not followed, and only a regular file is read.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) return {{}, 0};
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return {{}, 0};
  }
  const auto size = static_cast<std::uint64_t>(st.st_size);
  const auto want = static_cast<std::size_t>(std::min<std::uint64_t>(size, limit));
  off_t offset = tail ? static_cast<off_t>(size - want) : 0;
  std::string data(want, '\0');
  std::size_t got = 0;
  while (got < want) {
    ssize_t n = ::pread(fd, data.data() + got, want - got, offset + static_cast<off_t>(got));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<std::size_t>(n);
  }
  data.resize(got);
  ::close(fd);
  return {std::move(data), size};
}

}  // namespace dockhand::plugins::process
