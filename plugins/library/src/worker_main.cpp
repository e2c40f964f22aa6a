// dockhand-library-worker: a worker process of the library runner (worker_pool.h). It runs the
// task functions of job libraries one task at a time, so that a task that crashes costs this
// process and not the agent.
//
// Threads: the main thread reads the channel (fd 3): a task to run goes to the task thread; a
// kill sets the task's flag and calls its callback; a dump samples the task thread's stack.
// The task thread loads the job library (once per path), calls the function and sends the end.
// Both send on the channel, under `send_mutex`. When the channel closes (the agent ended or
// gave this worker up) the process exits at once, whatever the task thread does.
#include <fcntl.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <deque>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "job_library.h"
#include "library_config.h"
#include "stack_sampler.h"
#include "task_end.h"
#include "thread_dump.h"
#include "worker_channel.h"

namespace dockhand::plugins::library {
namespace {

using nlohmann::json;

constexpr int kChannelFd = 3;
constexpr auto kSampleTimeout = std::chrono::milliseconds(1000);

struct Run {
  std::string task_json;
  std::string path;
  std::string label;
  int library_fd = -1;  // the job library the runner opened and checked; taken by load()
};

class Worker {
 public:
  explicit Worker(LibraryConfig config) : config_(std::move(config)) {}

  void send(const json& message) {
    const std::string bytes = frameMessage(message);
    std::lock_guard lock(send_mutex_);
    if (!writeAll(kChannelFd, bytes)) std::_Exit(0);  // the agent is gone
  }

  // Main thread: a message from the runner; `descriptors` are those that came with the channel's
  // bytes so far, in order (a run takes the first).
  void handle(const json& message, std::deque<int>& descriptors) {
    const std::string type = message.at("t").get<std::string>();
    if (type == "run") {
      int library_fd = -1;
      if (message.value("with_file", false)) {
        if (descriptors.empty()) {
          throw std::runtime_error("a run came without its job library's descriptor");
        }
        library_fd = descriptors.front();
        descriptors.pop_front();
      }
      std::lock_guard lock(mutex_);
      pending_ = Run{message.at("task").get<std::string>(), message.at("path").get<std::string>(),
                     message.at("label").get<std::string>(), library_fd};
      assigned_ = message.at("id").get<std::uint64_t>();
      kill_reason_.reset();
      work_.notify_one();
    } else if (type == "kill") {
      kill(message.at("id").get<std::uint64_t>(), message.at("reason").get<std::string>());
    } else if (type == "dump") {
      dump(message.at("id").get<std::uint64_t>());
    } else {
      throw std::runtime_error("unknown message type '" + type + "'");
    }
  }

  // The task thread's loop.
  void taskLoop() {
    StackSampler::prepareThread();
    tid_ = static_cast<pid_t>(::syscall(SYS_gettid));
    for (;;) {
      Run run;
      {
        std::unique_lock lock(mutex_);
        work_.wait(lock, [&] { return pending_.has_value(); });
        run = std::move(*pending_);
        pending_.reset();
      }
      runOne(run);
    }
  }

  pthread_t task_thread{};

 private:
  void runOne(const Run& run) {
    TaskSpec spec;
    try {
      spec = parseTask(run.task_json);
    } catch (const std::exception& e) {
      fatal(std::string("a task the runner sent cannot be read: ") + e.what());
    }
    const auto started = std::chrono::steady_clock::now();
    auto fail = [&](const std::string& reason) {
      {
        std::lock_guard lock(mutex_);
        assigned_.reset();
        kill_reason_.reset();
      }
      send({{"t", "end"},
            {"id", spec.task_id},
            {"state", DH_TASK_FAILED},
            {"detail", reasonJson(reason)}});
    };
    std::shared_ptr<JobLibrary> library;
    try {
      library = load(run.path, run.library_fd);
    } catch (const LibraryRefused& e) {
      fail(e.what());
      return;
    }
    dh_task_fn function = library->find(spec.function);
    if (function == nullptr) {
      fail("payload/function: job library '" + library->name() + "' (" + run.path +
           ") has no function '" + spec.function + "' (it has: " + library->functionNames() + ")");
      return;
    }
    auto context =
        std::make_shared<TaskContext>(spec, [this](std::int32_t level, const std::string& line) {
          send({{"t", "log"}, {"level", level}, {"line", line}});
        });
    bool killed_early = false;
    {
      std::lock_guard lock(mutex_);
      current_ = context;
      killed_early = kill_reason_.has_value();
    }
    send({{"t", "start"}, {"id", spec.task_id}});
    if (killed_early) context->requestKill();
    const FunctionReturn returned = callFunction(function, *context);
    const auto elapsed = std::chrono::steady_clock::now() - started;
    std::optional<std::string> kill_reason;
    {
      std::lock_guard lock(mutex_);
      current_.reset();
      kill_reason = kill_reason_;
      kill_reason_.reset();
      assigned_.reset();
    }
    const auto duration_ms = static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::milliseconds>(elapsed).count());
    const TerminalReport end =
        endReport(spec, run.label, config_, *context, returned, kill_reason, duration_ms);
    send({{"t", "end"}, {"id", spec.task_id}, {"state", end.state}, {"detail", end.detailJson()}});
  }

  // The library loaded from `path` before, or loaded now from its file: `fd` (taken) when
  // the runner sent it with this run (-1 when it did not, as it does only once per worker),
  // kept for another try when loading fails.
  std::shared_ptr<JobLibrary> load(const std::string& path, int fd) {
    if (fd >= 0) {
      if (auto old = files_.find(path); old != files_.end()) ::close(old->second);
      files_[path] = fd;
    }
    if (auto it = libraries_.find(path); it != libraries_.end()) return it->second;
    auto file = files_.find(path);
    if (file == files_.end()) {
      throw LibraryRefused("job library '" + path +
                           "': the runner sent no file for a library this worker has not loaded");
    }
    const int copy = ::fcntl(file->second, F_DUPFD_CLOEXEC, 0);
    if (copy < 0) {
      throw LibraryRefused("job library '" + path + "': " + std::strerror(errno));
    }
    auto library = JobLibrary::load(copy, path);
    send({{"t", "log"},
          {"level", DH_LOG_INFO},
          {"line", "worker " + std::to_string(::getpid()) + " loaded job library '" +
                       library->name() + "' " + library->version() + " (" + path +
                       "): " + library->functionNames()}});
    return libraries_.emplace(path, library).first->second;
  }

  void kill(std::uint64_t id, const std::string& reason) {
    std::shared_ptr<TaskContext> context;
    {
      std::lock_guard lock(mutex_);
      if (assigned_ != id) return;  // it ended already: its end is on its way
      if (!kill_reason_) kill_reason_ = reason;
      context = current_;  // null until the function is about to be called
    }
    if (context) context->requestKill();
  }

  void dump(std::uint64_t id) {
    json reply = {{"t", "dump"}, {"id", id}, {"tid", tid_}};
    auto frames = sampler_.sample(task_thread, slot_, kSampleTimeout);
    bool same = false;
    {
      std::lock_guard lock(mutex_);
      same = current_ && assigned_ == id;
    }
    putStack(reply, frames, same, "the task was not running while its stack was being taken");
    send(reply);
  }

  [[noreturn]] void fatal(const std::string& reason) {
    send({{"t", "fatal"}, {"reason", reason}});
    std::_Exit(3);
  }

  StackSlot slot_;
  LibraryConfig config_;
  std::mutex send_mutex_;
  std::mutex mutex_;
  std::condition_variable work_;
  std::optional<Run> pending_;
  std::optional<std::uint64_t> assigned_;   // the task given to the task thread, until its end
  std::optional<std::string> kill_reason_;  // of the assigned task
  std::shared_ptr<TaskContext> current_;    // while its function may run
  std::map<std::string, std::shared_ptr<JobLibrary>> libraries_;  // task thread only
  std::map<std::string, int> files_;  // the runner's checked files, by path (task thread only)
  StackSampler sampler_;
  pid_t tid_ = 0;
};

// Reads the next message, blocking, and the descriptors that came with it (appended to
// `descriptors`); exits the process when the channel closed.
json nextMessage(MessageReader& reader, std::deque<int>& descriptors) {
  for (;;) {
    if (auto message = reader.next()) return *message;
    char buffer[65536];
    ssize_t n = receiveWithDescriptors(kChannelFd, buffer, sizeof buffer, descriptors);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) std::_Exit(0);
    reader.feed(buffer, static_cast<std::size_t>(n));
  }
}

int run() {
  std::signal(SIGPIPE, SIG_IGN);
  if (::fcntl(kChannelFd, F_GETFD) < 0) {
    std::fprintf(stderr,
                 "dockhand-library-worker: no channel on fd 3; this program is started by the "
                 "agent's library runner (worker_processes), not by hand\n");
    return 2;
  }
  MessageReader reader;
  std::deque<int> descriptors;
  std::unique_ptr<Worker> worker;
  try {
    json first = nextMessage(reader, descriptors);
    if (first.at("t") != "config") throw std::runtime_error("the first message is not a config");
    worker = std::make_unique<Worker>(parseConfig(first.at("config").get<std::string>()));
  } catch (const std::exception& e) {
    std::string bytes = frameMessage({{"t", "fatal"}, {"reason", e.what()}});
    writeAll(kChannelFd, bytes);
    return 3;
  }
  std::thread task_thread([&] { worker->taskLoop(); });
  worker->task_thread = task_thread.native_handle();
  task_thread.detach();
  worker->send({{"t", "ready"}, {"pid", ::getpid()}});
  for (;;) {
    json message = nextMessage(reader, descriptors);
    try {
      worker->handle(message, descriptors);
    } catch (const std::exception& e) {
      worker->send(
          {{"t", "fatal"}, {"reason", std::string("a message from the runner: ") + e.what()}});
      std::_Exit(3);
    }
  }
}

}  // namespace
}  // namespace dockhand::plugins::library

int main() { return dockhand::plugins::library::run(); }
