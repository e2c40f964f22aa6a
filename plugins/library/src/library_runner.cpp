#include "library_runner.h"

#include <dlfcn.h>
#include <pthread.h>
#include <time.h>

#include <algorithm>
#include <exception>
#include <vector>

#include <nlohmann/json.hpp>

#include "task_end.h"
#include "thread_dump.h"

namespace dockhand::plugins::library {
namespace {

using nlohmann::json;

constexpr auto kIdleKeepAlive = std::chrono::seconds(60);  // Spark's cached thread pool
constexpr auto kPoolStopWait = std::chrono::milliseconds(500);
constexpr auto kSampleTimeout = std::chrono::milliseconds(1000);

std::uint64_t millisSince(std::chrono::steady_clock::time_point start) {
  auto elapsed = std::chrono::steady_clock::now() - start;
  return static_cast<std::uint64_t>(std::max<std::int64_t>(
      0, std::chrono::duration_cast<std::chrono::milliseconds>(elapsed).count()));
}

// Keeps this plugin's code mapped for good: a task thread left running returns into it.
void pinThisLibrary() {
  Dl_info info{};
  if (::dladdr(reinterpret_cast<void*>(&pinThisLibrary), &info) != 0 && info.dli_fname != nullptr) {
    ::dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);
  }
}

std::string names(const std::map<std::string, std::string>& libraries) {
  std::string out;
  for (const auto& [name, path] : libraries) out += (out.empty() ? "" : ", ") + name;
  return out.empty() ? "none" : out;
}

}  // namespace

LibraryRunner::State::State(sdk::Host host, LibraryConfig parsed)
    : gate(std::make_shared<HostGate>(host)), config(std::move(parsed)) {}

LibraryRunner::LibraryRunner(sdk::Host host, std::string_view config_json)
    : state_(std::make_shared<State>(host, parseConfig(config_json))), pool_(kIdleKeepAlive) {
  const LibraryConfig& config = state_->config;
  host.info("job libraries: " + names(config.libraries) + "; results above " +
            std::to_string(config.max_direct_result_bytes) + " bytes go back as blocks, above " +
            std::to_string(config.max_result_bytes) + " fail; a killed task has " +
            std::to_string(config.kill_timeout.count()) + " ms to return" +
            (config.exit_on_unkillable ? ", else the agent ends" : ""));
  if (config.worker_processes > 0) {
    workers_ = std::make_unique<WorkerPool>(state_->gate, config, std::string(config_json));
    host.info("tasks run in " + std::to_string(config.worker_processes) +
              " worker processes, one task at a time each");
  }
  reaper_ = std::thread([this] {
    ::pthread_setname_np(::pthread_self(), "dh-lib-reaper");
    reaperLoop();
  });
}

LibraryRunner::~LibraryRunner() {
  workers_.reset();  // reports what ran there, while the gate is open
  std::vector<std::shared_ptr<Task>> running;
  {
    std::lock_guard lock(state_->mutex);
    state_->stopping = true;
    for (auto& [id, task] : state_->tasks) {
      if (!task->kill_requested) {
        task->kill_requested = true;
        task->kill_reason = "task runner shut down";
      }
      running.push_back(task);
    }
  }
  state_->reaper_wake.notify_all();
  if (reaper_.joinable()) reaper_.join();
  for (auto& task : running) task->context->requestKill();
  running.clear();
  {
    std::unique_lock lock(state_->mutex);
    state_->ended.wait_for(lock, state_->config.shutdownWait(),
                           [&] { return state_->tasks.empty(); });
    for (auto& [id, task] : state_->tasks) running.push_back(task);
  }
  for (auto& task : running) {
    abandon(task, describeTask(task->spec, task->library_label) +
                      " did not return after the task runner shut down; its " +
                      "thread was left running");
  }
  state_->gate->close();
  if (std::size_t left = pool_.stop(kPoolStopWait); left > 0) {
    sampler_.keepInstalled();
    pinThisLibrary();
  }
}

std::string LibraryRunner::libraryPath(const TaskSpec& spec) const {
  if (spec.library.front() == '/') return spec.library;
  auto it = state_->config.libraries.find(spec.library);
  if (it == state_->config.libraries.end()) {
    throw sdk::Error(DH_INVALID_ARGUMENT,
                     "payload/library: no job library '" + spec.library +
                         "' in config/libraries (configured: " + names(state_->config.libraries) +
                         "); name one of them or give the absolute path of a job library");
  }
  return it->second;
}

std::shared_ptr<JobLibrary> LibraryRunner::loadLibrary(const std::string& path) {
  {
    std::lock_guard lock(state_->mutex);
    if (auto it = state_->libraries.find(path); it != state_->libraries.end()) return it->second;
  }
  // Refusals are not remembered: the next launch checks the file again (cheap), so fixing
  // it needs no restart.
  std::shared_ptr<JobLibrary> library;
  try {
    library = JobLibrary::open(path, state_->config.allow_insecure_libraries, verifier());
  } catch (const LibraryRefused& e) {
    throw sdk::Error(DH_ERROR, e.what());
  }
  state_->gate->with([&](const sdk::Host& host) {
    host.info("loaded job library '" + library->name() + "' " + library->version() + " (" + path +
              "): " + library->functionNames());
  });
  std::lock_guard lock(state_->mutex);
  return state_->libraries.emplace(path, library).first->second;
}

std::shared_ptr<const LibraryFile> LibraryRunner::libraryFile(const std::string& path) {
  {
    std::lock_guard lock(state_->mutex);
    if (auto it = state_->files.find(path); it != state_->files.end()) return it->second;
  }
  std::shared_ptr<const LibraryFile> file;
  try {
    file = std::make_shared<const LibraryFile>(
        JobLibrary::openFile(path, state_->config.allow_insecure_libraries, verifier()));
  } catch (const LibraryRefused& e) {
    throw sdk::Error(DH_ERROR, e.what());
  }
  std::lock_guard lock(state_->mutex);
  return state_->files.emplace(path, file).first->second;
}

CodeVerifier LibraryRunner::verifier() const {
  return [gate = state_->gate](int fd, const std::string& path) {
    std::string why = "the task runner is shutting down";
    gate->with([&](const sdk::Host& host) { why = host.verifyCode(fd, path); });
    return why;
  };
}

std::shared_ptr<JobLibrary> LibraryRunner::loadedLibrary(const std::string& path) const {
  std::lock_guard lock(state_->mutex);
  auto it = state_->libraries.find(path);
  return it == state_->libraries.end() ? nullptr : it->second;
}

void LibraryRunner::launch(std::string_view task_json) { start(task_json, /*may_wait=*/true); }

bool LibraryRunner::tryLaunch(std::string_view task_json) {
  return start(task_json, /*may_wait=*/false);
}

bool LibraryRunner::start(std::string_view task_json, bool may_wait) {
  // A worker process gets its task over a socket, after a check of the library's file.
  if (workers_ && !may_wait) return false;
  auto task = std::make_shared<Task>();
  task->spec = parseTask(task_json);
  const TaskSpec& spec = task->spec;
  {
    std::lock_guard lock(state_->mutex);
    if (state_->stopping) throw sdk::Error(DH_ERROR, "the task runner is shutting down");
    if (state_->tasks.count(spec.task_id) != 0) {
      throw sdk::Error(DH_INVALID_ARGUMENT,
                       "task " + std::to_string(spec.task_id) + " is already running");
    }
  }
  const std::string path = libraryPath(spec);
  if (workers_) {
    workers_->launch(spec, std::string(task_json), path, spec.library, libraryFile(path));
    return true;
  }
  task->library_label = spec.library;
  task->library = may_wait ? loadLibrary(path) : loadedLibrary(path);
  if (task->library == nullptr) return false;  // loading it may take a while
  task->function = task->library->find(spec.function);
  if (task->function == nullptr) {
    throw sdk::Error(DH_INVALID_ARGUMENT, "payload/function: job library '" +
                                              task->library->name() + "' (" + path +
                                              ") has no function '" + spec.function +
                                              "' (it has: " + task->library->functionNames() + ")");
  }
  task->context = std::make_unique<TaskContext>(
      task->spec, [gate = state_->gate](std::int32_t level, const std::string& line) {
        gate->with([&](const sdk::Host& host) { host.log(level, line); });
      });
  {
    std::lock_guard lock(state_->mutex);
    state_->tasks.emplace(spec.task_id, task);
  }
  // RUNNING is reported here, on the launching thread, before the task's thread is woken: on
  // the agent's core thread (try_launch) it leaves with the launch's turn rather than after a
  // wake of its own, and the task's end (its thread may be quicker than this thread's return)
  // comes after it without a lock held across the hand-off, which that thread would wait on.
  report(*state_, *task, DH_TASK_RUNNING, {});
  try {
    pool_.submit([state = state_, task](WorkerThread& worker) { runTask(state, task, worker); });
  } catch (const std::exception& e) {
    report(*state_, *task, DH_TASK_FAILED,
           reasonJson(std::string("cannot start a thread for the task: ") + e.what()));
  }
  return true;
}

bool LibraryRunner::report(State& state, Task& task, std::int32_t status,
                           const std::string& detail) {
  std::lock_guard order(task.report_mutex);
  const bool terminal = status != DH_TASK_RUNNING;
  bool sent = false;
  state.gate->with([&](const sdk::Host& host) {
    {
      std::lock_guard lock(state.mutex);
      if (task.reported) return;
      if (terminal) {
        task.reported = true;
        state.tasks.erase(task.spec.task_id);
      }
    }
    host.taskStatus(task.spec.task_id, status, detail);
    sent = true;
  });
  if (terminal) state.ended.notify_all();
  return sent;
}

void LibraryRunner::runTask(const std::shared_ptr<State>& state, const std::shared_ptr<Task>& task,
                            WorkerThread& worker) {
  {
    std::lock_guard lock(state->mutex);
    task->worker = &worker;
    task->started = Clock::now();
  }
  const FunctionReturn returned = callFunction(task->function, *task->context);
  const std::uint64_t duration_ms = millisSince(task->started);
  bool killed = false;
  bool abandoned = false;
  std::string kill_reason;
  {
    std::lock_guard lock(state->mutex);
    task->worker = nullptr;
    task->returned = true;
    killed = task->kill_requested;
    kill_reason = task->kill_reason;
    abandoned = task->reported;
  }
  if (abandoned) {
    state->gate->with([&](const sdk::Host& host) {
      host.warn(describeTask(task->spec, task->library_label) + " returned " +
                std::to_string(duration_ms) +
                " ms after it started, after it was reported KILLED; its thread is free again");
    });
    return;
  }
  const TerminalReport end =
      endReport(task->spec, task->library_label, state->config, *task->context, returned,
                killed ? std::optional<std::string>(kill_reason) : std::nullopt, duration_ms);
  report(*state, *task, end.state, end.detailJson());
}

void LibraryRunner::kill(std::uint64_t task_id, bool /*interrupt*/, std::string_view reason) {
  // A thread cannot be stopped from outside: interrupt or not, the function is asked to stop
  // (cancelled flag and callback) and given kill_timeout_ms.
  if (workers_) {
    workers_->kill(task_id, reason.empty() ? std::string("killed") : std::string(reason));
    return;
  }
  std::shared_ptr<Task> task;
  {
    std::lock_guard lock(state_->mutex);
    auto it = state_->tasks.find(task_id);
    if (it == state_->tasks.end()) {
      throw sdk::Error(DH_NOT_FOUND, "no running task " + std::to_string(task_id));
    }
    task = it->second;
    if (!task->kill_requested) {
      task->kill_requested = true;
      task->kill_reason = reason.empty() ? std::string("killed") : std::string(reason);
      state_->deadlines.emplace(Clock::now() + state_->config.kill_timeout, task_id);
    }
  }
  state_->reaper_wake.notify_all();
  task->context->requestKill();
}

void LibraryRunner::abandon(const std::shared_ptr<Task>& task, const std::string& why) {
  if (!report(*state_, *task, DH_TASK_KILLED, reasonJson(why))) return;
  state_->gate->with([&](const sdk::Host& host) { host.warn(why); });
}

void LibraryRunner::reaperLoop() {
  std::unique_lock lock(state_->mutex);
  while (!state_->stopping) {
    if (state_->deadlines.empty()) {
      state_->reaper_wake.wait(lock);
      continue;
    }
    const auto next = state_->deadlines.begin()->first;
    if (Clock::now() < next) {
      state_->reaper_wake.wait_until(lock, next);
      continue;
    }
    const std::uint64_t task_id = state_->deadlines.begin()->second;
    state_->deadlines.erase(state_->deadlines.begin());
    auto it = state_->tasks.find(task_id);
    if (it == state_->tasks.end() || it->second->returned) continue;
    std::shared_ptr<Task> task = it->second;
    lock.unlock();
    const std::string timeout_ms = std::to_string(state_->config.kill_timeout.count());
    const std::string what = describeTask(task->spec, task->library_label) +
                             " did not return within kill_timeout_ms (" + timeout_ms +
                             " ms) of its kill";
    abandon(task, what + " (" + task->kill_reason + "); its thread was left running");
    if (state_->config.exit_on_unkillable) {
      state_->gate->with([&](const sdk::Host& host) {
        if (!host.unrecoverable(what)) {
          host.error(
              "exit_on_unkillable is set but this agent cannot be asked to end (plugin "
              "ABI older than 1.3): " +
              what);
        }
      });
    }
    lock.lock();
  }
}

std::string LibraryRunner::threadDump(std::uint64_t task_id) {
  if (workers_) return workers_->threadDump(task_id);
  std::shared_ptr<Task> task;
  WorkerThread* worker = nullptr;
  {
    std::lock_guard lock(state_->mutex);
    auto it = state_->tasks.find(task_id);
    if (it == state_->tasks.end()) {
      throw sdk::Error(DH_NOT_FOUND, "no running task " + std::to_string(task_id));
    }
    task = it->second;
    worker = task->worker;
  }
  json thread = dumpThread(task->spec.function, task->library_label);
  if (worker == nullptr) {
    thread["state"] = task->returned ? "returned" : "starting";
  } else {
    // The worker (and its slot) lives as long as its thread; only this thread (submit) or the
    // destructor ever frees one, so it may be used without the lock.
    thread["tid"] = worker->tid;
    auto frames = sampler_.sample(worker->thread, worker->slot, kSampleTimeout);
    bool same_task = false;
    {
      std::lock_guard lock(state_->mutex);
      same_task = task->worker == worker;
    }
    putStack(thread, frames, same_task, "the task returned while its stack was being taken");
  }
  return dumpText(task_id, thread);
}

std::string LibraryRunner::taskStats(std::uint64_t task_id) {
  if (workers_) return workers_->taskStats(task_id);
  json stats = {{"task_id", task_id}};
  std::lock_guard lock(state_->mutex);
  auto it = state_->tasks.find(task_id);
  if (it == state_->tasks.end()) {
    throw sdk::Error(DH_NOT_FOUND, "no running task " + std::to_string(task_id));
  }
  if (WorkerThread* worker = it->second->worker; worker != nullptr) {
    clockid_t clock{};
    timespec used{};
    if (::pthread_getcpuclockid(worker->thread, &clock) == 0 &&
        ::clock_gettime(clock, &used) == 0) {
      stats["cpu_time_ms"] = static_cast<std::uint64_t>(used.tv_sec) * 1000 +
                             static_cast<std::uint64_t>(used.tv_nsec) / 1000000;
    }
  }
  return stats.dump();
}

}  // namespace dockhand::plugins::library
