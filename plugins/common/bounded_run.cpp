#include "bounded_run.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "dockhand/base/child_spawn.h"

namespace dockhand::plugins {
namespace {

class Pipe {
 public:
  Pipe() {
    if (::pipe2(fds_, O_CLOEXEC) != 0) {
      throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
    }
  }
  ~Pipe() {
    closeRead();
    closeWrite();
  }
  Pipe(const Pipe&) = delete;
  Pipe& operator=(const Pipe&) = delete;
  int read() const { return fds_[0]; }
  int write() const { return fds_[1]; }
  void closeRead() { closeFd(fds_[0]); }
  void closeWrite() { closeFd(fds_[1]); }

 private:
  static void closeFd(int& fd) {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
  int fds_[2] = {-1, -1};
};

// Starts args[0] in a process group of its own, stdin from /dev/null, stdout and stderr into
// the pipes' write ends, no signal blocked.
pid_t spawn(const std::vector<std::string>& args, const Pipe& out, const Pipe& err) {
  ChildSpawn child;
  child.ownProcessGroup().cleanSignals().stdinFromNull().dup(out.write(), 1).dup(err.write(), 2);
  const Result<pid_t> pid = child.start(args);
  if (!pid) throw std::runtime_error(pid.error().message);
  return *pid;
}

}  // namespace

BoundedRun runBounded(const std::vector<std::string>& args, std::chrono::milliseconds timeout) {
  Pipe out;
  Pipe err;
  const pid_t pid = spawn(args, out, err);
  out.closeWrite();
  err.closeWrite();

  BoundedRun run;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  bool out_open = true;
  bool err_open = true;
  char buffer[4096];
  while (out_open || err_open) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      run.timed_out = true;
      break;
    }
    pollfd fds[2] = {{out_open ? out.read() : -1, POLLIN, 0},
                     {err_open ? err.read() : -1, POLLIN, 0}};
    const int ready = ::poll(fds, 2, static_cast<int>(left.count()));
    if (ready < 0 && errno == EINTR) continue;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      const ssize_t n = ::read(fds[i].fd, buffer, sizeof buffer);
      if (n > 0) {
        std::string& sink = i == 0 ? run.out : run.err;
        sink.append(buffer, static_cast<std::size_t>(n));
        if (sink.size() > kBoundedRunCaptureBytes) sink.resize(kBoundedRunCaptureBytes);
      } else if (n == 0 || errno != EINTR) {
        (i == 0 ? out_open : err_open) = false;
      }
    }
  }
  if (run.timed_out) ::kill(-pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status)) run.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) run.signal = WTERMSIG(status);
  return run;
}

}  // namespace dockhand::plugins
