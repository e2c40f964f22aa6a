#include "worker_pool.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "dockhand/base/child_spawn.h"
#include "dockhand/base/loaded_object.h"
#include "dockhand/plugin.hpp"
#include "task_end.h"
#include "thread_dump.h"

namespace dockhand::plugins::library {
namespace {

using nlohmann::json;

constexpr int kMaxStartFailures = 3;
constexpr auto kDumpWait = std::chrono::milliseconds(2000);
constexpr auto kExitWait = std::chrono::milliseconds(200);

std::string errnoText(int error) { return std::generic_category().message(error); }

// "signal 6 (SIGABRT)" or "exit status 3".
std::string describeStatus(int status) {
  if (WIFSIGNALED(status)) {
    const int signal = WTERMSIG(status);
    const char* abbrev = ::sigabbrev_np(signal);
    return "signal " + std::to_string(signal) +
           (abbrev != nullptr ? std::string(" (SIG") + abbrev + ")" : std::string());
  }
  if (WIFEXITED(status)) return "exit status " + std::to_string(WEXITSTATUS(status));
  return "wait status " + std::to_string(status);
}

void waitFor(pid_t pid, std::chrono::milliseconds grace) {
  const auto until = std::chrono::steady_clock::now() + grace;
  int status = 0;
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() >= until) {
      ::kill(pid, SIGKILL);
      while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      return;
    }
    ::usleep(2000);
  }
}

}  // namespace

std::string WorkerPool::defaultProgram() {
  const std::filesystem::path self =
      loadedObjectPath(reinterpret_cast<const void*>(&WorkerPool::defaultProgram));
  if (self.empty()) return {};
  return (self.has_parent_path() ? self.parent_path() : std::filesystem::path("."))
      .append("dockhand-library-worker")
      .string();
}

WorkerPool::WorkerPool(std::shared_ptr<HostGate> gate, const LibraryConfig& config,
                       std::string config_json)
    : gate_(std::move(gate)),
      config_(config),
      config_json_(std::move(config_json)),
      program_(config.worker_program.empty() ? defaultProgram() : config.worker_program) {
  if (::access(program_.c_str(), X_OK) != 0) {
    throw sdk::Error(DH_ERROR, "config/worker_processes: the worker program " + program_ +
                                   " cannot be run (" + errnoText(errno) +
                                   "); install it next to the plugin or set worker_program");
  }
  wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake_fd_ < 0) throw sdk::Error(DH_ERROR, "eventfd: " + errnoText(errno));
  try {
    std::lock_guard lock(mutex_);
    for (std::uint32_t i = 0; i < config.worker_processes; ++i) spawn();
  } catch (...) {
    for (auto& process : processes_) {
      ::close(process->fd);
      waitFor(process->pid, std::chrono::milliseconds(0));
    }
    ::close(wake_fd_);
    throw;
  }
  io_ = std::thread([this] {
    ::pthread_setname_np(::pthread_self(), "dh-lib-workers");
    ioLoop();
  });
}

WorkerPool::~WorkerPool() {
  std::vector<Event> events;
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    for (std::uint64_t id : queue_) {
      auto& task = tasks_.at(id);
      task->kill_requested = true;
      events.push_back({task, DH_TASK_KILLED, reasonJson("task runner shut down")});
    }
    queue_.clear();
    for (auto& process : processes_) {
      if (!process->task) continue;
      auto& task = tasks_.at(*process->task);
      if (!task->kill_requested) {
        task->kill_requested = true;
        task->kill_reason = "task runner shut down";
        send(*process, {{"t", "kill"}, {"id", task->spec.task_id}, {"reason", task->kill_reason}});
      }
    }
  }
  wake();
  deliver(events);
  {
    std::unique_lock lock(mutex_);
    changed_.wait_for(lock, config_.shutdownWait(), [&] { return tasks_.empty(); });
    for (auto& [id, task] : tasks_) {
      events.push_back({task, DH_TASK_KILLED,
                        reasonJson(describeTask(task->spec, task->label) +
                                   " did not return after the task runner shut down; its worker "
                                   "process was killed")});
    }
    closing_ = true;
  }
  deliver(events);
  wake();
  if (io_.joinable()) io_.join();
  for (auto& process : processes_) {
    ::close(process->fd);  // the worker exits when its channel closes
    waitFor(process->pid, kExitWait);
  }
  ::close(wake_fd_);
}

void WorkerPool::spawn() {
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
    throw sdk::Error(DH_ERROR, "socketpair for a worker process: " + errnoText(errno));
  }
  // Its own process group (a terminal's Ctrl-C reaches the agent, which ends the workers);
  // default dispositions and no blocked signals, whatever the agent's thread had; a task's
  // stdout goes to the log too; the channel is its fd 3.
  ChildSpawn child;
  child.ownProcessGroup().cleanSignals().stdinFromNull().dup(2, 1).dup(fds[1], 3).closeFrom(4);
  const Result<pid_t> pid = child.start(std::vector<std::string>{program_});
  ::close(fds[1]);
  if (!pid) {
    ::close(fds[0]);
    throw sdk::Error(DH_ERROR, "the worker program: " + pid.error().message);
  }
  ::fcntl(fds[0], F_SETFL, ::fcntl(fds[0], F_GETFL) | O_NONBLOCK);
  auto process = std::make_unique<Process>();
  process->pid = *pid;
  process->fd = fds[0];
  send(*process, {{"t", "config"}, {"config", config_json_}});
  processes_.push_back(std::move(process));
}

void WorkerPool::send(Process& process, const json& message, int pass) {
  process.outbox.append(frameMessage(message), pass);
  if (!flush(process)) wake();  // the I/O thread writes the rest when the socket takes it
}

bool WorkerPool::flush(Process& process) {
  if (process.closed) return true;
  const int error = process.outbox.flush(process.fd);
  if (error == EAGAIN) return false;
  if (error != 0) {
    process.closed = true;  // EPIPE and the like: it is gone, the reaper will see to it
    process.outbox.clear();
  }
  return true;
}

void WorkerPool::wake() {
  const std::uint64_t one = 1;
  [[maybe_unused]] ssize_t n = ::write(wake_fd_, &one, sizeof one);
}

void WorkerPool::dispatch() {
  while (!queue_.empty()) {
    Process* idle = nullptr;
    for (auto& process : processes_) {
      if (!process->task && !process->closed) {
        idle = process.get();
        break;
      }
    }
    if (idle == nullptr) return;
    const std::uint64_t id = queue_.front();
    queue_.pop_front();
    auto& task = tasks_.at(id);
    task->process = idle;
    task->pid = idle->pid;
    idle->task = id;
    // A worker gets a library's file once; it keeps what it loaded.
    const bool with_file = idle->libraries.insert(task->path).second;
    send(*idle,
         {{"t", "run"},
          {"id", id},
          {"task", task->task_json},
          {"path", task->path},
          {"label", task->label},
          {"with_file", with_file}},
         with_file ? ::fcntl(task->library->fd(), F_DUPFD_CLOEXEC, 0) : -1);
  }
}

void WorkerPool::launch(const TaskSpec& spec, const std::string& task_json, const std::string& path,
                        const std::string& label, std::shared_ptr<const LibraryFile> library) {
  auto task = std::make_shared<Task>();
  task->library = std::move(library);
  task->spec = spec;
  task->task_json = task_json;
  task->path = path;
  task->label = label;
  std::lock_guard lock(mutex_);
  if (stopping_) throw sdk::Error(DH_ERROR, "the task runner is shutting down");
  if (!broken_.empty()) throw sdk::Error(DH_ERROR, broken_);
  if (!tasks_.emplace(spec.task_id, task).second) {
    throw sdk::Error(DH_INVALID_ARGUMENT,
                     "task " + std::to_string(spec.task_id) + " is already running");
  }
  queue_.push_back(spec.task_id);
  dispatch();
}

void WorkerPool::kill(std::uint64_t task_id, const std::string& reason) {
  std::vector<Event> events;
  {
    std::lock_guard lock(mutex_);
    auto it = tasks_.find(task_id);
    if (it == tasks_.end()) {
      throw sdk::Error(DH_NOT_FOUND, "no running task " + std::to_string(task_id));
    }
    auto task = it->second;
    if (task->kill_requested) return;
    task->kill_requested = true;
    task->kill_reason = reason;
    if (task->process == nullptr) {
      queue_.erase(std::remove(queue_.begin(), queue_.end(), task_id), queue_.end());
      events.push_back({task, DH_TASK_KILLED, reasonJson(reason)});
    } else {
      send(*task->process, {{"t", "kill"}, {"id", task_id}, {"reason", reason}});
      deadlines_.emplace(Clock::now() + config_.kill_timeout, task_id);
      wake();
    }
  }
  deliver(events);
}

std::string WorkerPool::threadDump(std::uint64_t task_id) {
  std::unique_lock lock(mutex_);
  auto it = tasks_.find(task_id);
  if (it == tasks_.end()) {
    throw sdk::Error(DH_NOT_FOUND, "no running task " + std::to_string(task_id));
  }
  auto task = it->second;
  json thread = dumpThread(task->spec.function, task->label);
  if (task->process == nullptr) {
    thread["state"] = "queued";
  } else {  // its start may still be on its way: the worker knows better
    thread["pid"] = task->pid;
    dumps_[task_id].reset();
    send(*task->process, {{"t", "dump"}, {"id", task_id}});
    const bool answered = changed_.wait_for(lock, kDumpWait, [&] {
      auto dump = dumps_.find(task_id);
      return dump != dumps_.end() && dump->second.has_value();
    });
    if (!answered) {
      thread["error"] = "worker process " + std::to_string(task->pid) + " did not answer within " +
                        std::to_string(kDumpWait.count()) + " ms";
    } else {
      const json& reply = *dumps_.at(task_id);
      thread["tid"] = reply.value("tid", 0);
      if (reply.contains("stack")) {
        thread["stack"] = reply.at("stack");
      } else {
        thread["error"] = reply.value("error", std::string("no stack"));
      }
    }
    dumps_.erase(task_id);
  }
  return dumpText(task_id, thread);
}

std::string WorkerPool::taskStats(std::uint64_t task_id) {
  std::lock_guard lock(mutex_);
  auto it = tasks_.find(task_id);
  if (it == tasks_.end()) {
    throw sdk::Error(DH_NOT_FOUND, "no running task " + std::to_string(task_id));
  }
  const Task& task = *it->second;
  json stats = {{"task_id", task_id}};
  if (task.process != nullptr) stats["worker_pid"] = task.pid;
  clockid_t clock{};
  timespec now{};
  if (task.started && ::clock_getcpuclockid(task.pid, &clock) == 0 &&
      ::clock_gettime(clock, &now) == 0) {
    const std::int64_t ns = (now.tv_sec - task.cpu_at_start.tv_sec) * 1000000000LL +
                            (now.tv_nsec - task.cpu_at_start.tv_nsec);
    stats["cpu_time_ms"] = std::max<std::int64_t>(0, ns / 1000000);
  }
  return stats.dump();
}

bool WorkerPool::report(Task& task, std::int32_t state, const std::string& detail) {
  const bool terminal = state != DH_TASK_RUNNING;
  bool sent = false;
  std::lock_guard order(task.report_mutex);
  gate_->with([&](const sdk::Host& host) {
    {
      std::lock_guard lock(mutex_);
      if (task.reported) return;
      if (terminal) {
        task.reported = true;
        tasks_.erase(task.spec.task_id);
      }
    }
    host.taskStatus(task.spec.task_id, state, detail);
    sent = true;
  });
  if (terminal) changed_.notify_all();
  return sent;
}

void WorkerPool::deliver(std::vector<Event>& events) {
  for (auto& event : events) {
    if (event.task) {
      report(*event.task, event.state, event.detail);
    } else {
      gate_->with([&](const sdk::Host& host) { host.log(event.level, event.detail); });
    }
  }
  events.clear();
}

void WorkerPool::handle(Process& process, const json& message, std::vector<Event>& events) {
  const std::string type = message.at("t").get<std::string>();
  // The task a start or an end is about: the one this worker runs, or null when it was
  // reported already (the runner is shutting down).
  auto current = [&]() -> std::shared_ptr<Task> {
    const auto id = message.at("id").get<std::uint64_t>();
    if (!process.task || *process.task != id) {
      throw std::runtime_error("a '" + type + "' for task " + std::to_string(id) +
                               ", which it does not run");
    }
    auto it = tasks_.find(id);
    return it == tasks_.end() ? nullptr : it->second;
  };
  if (type == "ready") {
    process.ready = true;
    start_failures_ = 0;
  } else if (type == "start") {
    auto task = current();
    if (!task) return;
    task->started = true;
    clockid_t clock{};
    if (::clock_getcpuclockid(process.pid, &clock) == 0) {
      ::clock_gettime(clock, &task->cpu_at_start);
    }
    events.push_back({task, DH_TASK_RUNNING, {}});
  } else if (type == "end") {
    auto task = current();
    process.task.reset();
    if (!task) return;
    task->process = nullptr;
    events.push_back(
        {task, message.at("state").get<std::int32_t>(), message.at("detail").get<std::string>()});
  } else if (type == "log") {
    events.push_back({nullptr, 0, message.at("line").get<std::string>(),
                      message.at("level").get<std::int32_t>()});
  } else if (type == "dump") {
    const auto id = message.at("id").get<std::uint64_t>();
    if (auto it = dumps_.find(id); it != dumps_.end()) it->second = message;
    changed_.notify_all();
  } else if (type == "fatal") {
    process.fatal = message.at("reason").get<std::string>();
  } else {
    throw std::runtime_error("an unknown message type '" + type + "'");
  }
}

void WorkerPool::readFrom(Process& process, std::vector<Event>& events) {
  char buffer[65536];
  for (;;) {
    ssize_t n = ::read(process.fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (n <= 0) {
      process.closed = true;
      return;
    }
    process.reader.feed(buffer, static_cast<std::size_t>(n));
    try {
      while (auto message = process.reader.next()) handle(process, *message, events);
    } catch (const std::exception& e) {
      events.push_back({nullptr, 0,
                        "worker process " + std::to_string(process.pid) + " sent " + e.what() +
                            "; it is replaced",
                        DH_LOG_ERROR});
      ::kill(process.pid, SIGKILL);
      process.closed = true;
      return;
    }
  }
}

void WorkerPool::expireDeadlines(std::vector<Event>& /*events*/) {
  const auto now = Clock::now();
  while (!deadlines_.empty() && deadlines_.begin()->first <= now) {
    const std::uint64_t id = deadlines_.begin()->second;
    deadlines_.erase(deadlines_.begin());
    auto it = tasks_.find(id);
    if (it == tasks_.end() || it->second->process == nullptr) continue;
    it->second->reaped = true;
    ::kill(it->second->pid, SIGKILL);  // reap() reports it once the channel closes
  }
}

void WorkerPool::reap(std::vector<Event>& events) {
  for (auto it = processes_.begin(); it != processes_.end();) {
    Process& process = **it;
    if (!process.closed) {
      ++it;
      continue;
    }
    ::close(process.fd);
    ::kill(process.pid, SIGKILL);  // ours, and its channel is gone: it is ending anyway
    int status = 0;
    while (::waitpid(process.pid, &status, 0) < 0 && errno == EINTR) {
    }
    std::string how = describeStatus(status);
    if (!process.fatal.empty()) how += " after it said: " + process.fatal;
    const std::string who = "worker process " + std::to_string(process.pid);
    auto ran = process.task ? tasks_.find(*process.task) : tasks_.end();
    if (ran != tasks_.end()) {
      auto task = ran->second;
      task->process = nullptr;
      if (task->reaped) {
        events.push_back(
            {task, DH_TASK_KILLED,
             reasonJson(describeTask(task->spec, task->label) +
                        " did not return within kill_timeout_ms (" +
                        std::to_string(config_.kill_timeout.count()) + " ms) of its kill (" +
                        task->kill_reason + "); its " + who + " was killed")});
      } else if (stopping_ && task->kill_requested) {
        events.push_back({task, DH_TASK_KILLED, reasonJson(task->kill_reason)});
      } else {
        std::string reason = who;
        reason += " running " + describeTask(task->spec, task->label);
        reason += " died: " + how;
        events.push_back({task, DH_TASK_FAILED, reasonJson(reason)});
      }
    }
    if (!process.ready && ++start_failures_ >= kMaxStartFailures && broken_.empty()) {
      broken_ = "library runner: " + std::to_string(start_failures_) +
                " worker processes in a row ended before they were ready (the last: " + how +
                "); no more are started";
    }
    std::string ended = who;
    ended += " ended (" + how + ")";
    if (!stopping_ && broken_.empty()) ended += "; another takes its place";
    events.push_back(
        {nullptr, 0, ended, process.task || !process.ready ? DH_LOG_WARN : DH_LOG_INFO});
    it = processes_.erase(it);
    if (!stopping_ && broken_.empty()) {
      try {
        spawn();
      } catch (const sdk::Error& e) {
        broken_ = std::string("library runner: cannot replace a worker process: ") + e.what();
      }
    }
  }
  if (!broken_.empty() && processes_.empty()) {
    for (std::uint64_t id : queue_) {
      events.push_back({tasks_.at(id), DH_TASK_FAILED, reasonJson(broken_)});
    }
    queue_.clear();
  }
}

void WorkerPool::ioLoop() {
  std::vector<pollfd> fds;
  std::vector<Process*> polled;
  std::vector<Event> events;
  for (;;) {
    int timeout = -1;
    fds.clear();
    polled.clear();
    {
      std::lock_guard lock(mutex_);
      if (closing_) return;
      fds.push_back({wake_fd_, POLLIN, 0});
      for (auto& process : processes_) {
        const auto want = static_cast<short>(POLLIN | (process->outbox.empty() ? 0 : POLLOUT));
        fds.push_back({process->fd, want, 0});
        polled.push_back(process.get());
      }
      if (!deadlines_.empty()) {
        auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(
            deadlines_.begin()->first - Clock::now());
        timeout = static_cast<int>(std::clamp<std::int64_t>(wait.count() + 1, 0, 60000));
      }
    }
    int n = ::poll(fds.data(), fds.size(), timeout);
    if (n < 0 && errno != EINTR) {
      gate_->with([&](const sdk::Host& host) {
        host.error("library runner: poll failed: " + errnoText(errno));
      });
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (fds[0].revents != 0) {
      std::uint64_t count = 0;
      [[maybe_unused]] ssize_t r = ::read(wake_fd_, &count, sizeof count);
    }
    {
      std::lock_guard lock(mutex_);
      for (std::size_t i = 0; i < polled.size(); ++i) {
        Process& process = *polled[i];
        const short revents = fds[i + 1].revents;
        if ((revents & POLLOUT) != 0) flush(process);
        if ((revents & (POLLIN | POLLHUP | POLLERR)) != 0) readFrom(process, events);
      }
      expireDeadlines(events);
      reap(events);
      dispatch();
    }
    deliver(events);
  }
}

}  // namespace dockhand::plugins::library
