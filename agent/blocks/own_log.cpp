#include "blocks/own_log.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace dockhand::agent {

LogFile openOwnLog(const std::string& stream) {
  int fd = -1;
  if (stream == "stdout") {
    fd = STDOUT_FILENO;
  } else if (stream == "stderr") {
    fd = STDERR_FILENO;
  } else {
    return LogFile::refused(404,
                            "no such stream '" + stream + "' (the agent has stdout and stderr)");
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    return LogFile::refused(404,
                            "the agent's " + stream +
                                " is not a file (a terminal, a pipe or the journal: under systemd, "
                                "journalctl -u dockhand); start the agent with " +
                                stream + " redirected to a file to serve it here");
  }
  // The descriptor itself is open for writing only: the same file again, for reading.
  const std::string self = "/proc/self/fd/" + std::to_string(fd);
  const int reader = ::open(self.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  struct stat again {};
  if (reader < 0 || ::fstat(reader, &again) != 0 || again.st_dev != st.st_dev ||
      again.st_ino != st.st_ino) {
    const std::string why = reader < 0 ? std::strerror(errno) : "it was replaced meanwhile";
    if (reader >= 0) ::close(reader);
    return LogFile::refused(500, "cannot read the agent's " + stream + ": " + why);
  }
  return LogFile::open(reader);
}

}  // namespace dockhand::agent
