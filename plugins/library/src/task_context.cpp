#include "task_context.h"

#include "task_result.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <ctime>
#include <system_error>

#include "dockhand/plugin.hpp"

namespace dockhand::plugins::library {
namespace {

std::string errnoText(int error) { return std::generic_category().message(error); }

// Where a zero-byte input points: mmap cannot map nothing.
const char kEmpty[1] = {0};

}  // namespace

TaskContext::TaskContext(const TaskSpec& spec, LogSink log) : spec_(spec), log_(std::move(log)) {}

TaskContext::~TaskContext() { finish(); }

const dh_task_api* TaskContext::api() {
  static const dh_task_api kApi = {
      sizeof(dh_task_api), &taskId,      &attempt,   &partition,   &args,
      &inputCount,         &inputId,     &readInput, &writeOutput, &setResult,
      &setError,           &isCancelled, &onKill,    &log,         &lastError,
  };
  return &kApi;
}

void TaskContext::requestKill() {
  cancelled_.store(true);
  std::lock_guard lock(callback_mutex_);
  if (finished_ || callback_called_ || callback_ == nullptr) return;
  callback_called_ = true;
  callback_(callback_user_);
}

void TaskContext::finish() {
  {
    std::lock_guard lock(callback_mutex_);
    finished_ = true;
    callback_ = nullptr;
    callback_user_ = nullptr;
  }
  for (auto& [id, mapping] : inputs_) {
    if (mapping.address != nullptr) ::munmap(mapping.address, mapping.size);
  }
  inputs_.clear();
  for (auto& [id, fd] : outputs_) ::close(fd);
  outputs_.clear();
  std::lock_guard lock(log_file_mutex_);
  if (log_file_ >= 0) ::close(log_file_);
  log_file_ = -1;
  log_file_opened_ = true;
}

dh_status TaskContext::fail(dh_status status, std::string message) {
  last_error_ = std::move(message);
  return status;
}

std::uint64_t TaskContext::taskId(dh_task* task) { return of(task).spec_.task_id; }
std::uint32_t TaskContext::attempt(dh_task* task) { return of(task).spec_.attempt; }
std::int64_t TaskContext::partition(dh_task* task) { return of(task).spec_.partition; }

const char* TaskContext::args(dh_task* task, std::size_t* size) {
  const std::string& args = of(task).spec_.args;
  if (size != nullptr) *size = args.size();
  return args.c_str();
}

std::size_t TaskContext::inputCount(dh_task* task) { return of(task).spec_.inputs.size(); }

const char* TaskContext::inputId(dh_task* task, std::size_t index) {
  const auto& inputs = of(task).spec_.inputs;
  return index < inputs.size() ? inputs[index].c_str() : nullptr;
}

dh_status TaskContext::readInput(dh_task* task, const char* block_id, const void** data,
                                 std::size_t* size) {
  try {
    return of(task).readInputOf(block_id, data, size);
  } catch (const std::exception& e) {
    return of(task).fail(DH_ERROR, e.what());
  }
}

dh_status TaskContext::readInputOf(const char* block_id, const void** data, std::size_t* size) {
  if (block_id == nullptr || data == nullptr || size == nullptr) {
    return fail(DH_INVALID_ARGUMENT, "read_input: block_id, data and size must not be NULL");
  }
  const std::string id = block_id;
  bool listed = false;
  for (const auto& input : spec_.inputs) listed = listed || input == id;
  if (!listed) return fail(DH_NOT_FOUND, "read_input: '" + id + "' is not an input of this task");
  if (auto it = inputs_.find(id); it != inputs_.end()) {
    *data = it->second.address != nullptr ? it->second.address : kEmpty;
    *size = it->second.size;
    return DH_OK;
  }
  const std::string path = spec_.work_dir + "/input/" + id;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int error = errno;
    return fail(error == ENOENT ? DH_NOT_FOUND : DH_ERROR,
                "read_input: cannot open " + path + ": " + errnoText(error));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int error = errno;
    ::close(fd);
    return fail(DH_ERROR, "read_input: cannot stat " + path + ": " + errnoText(error));
  }
  Mapping mapping;
  mapping.size = static_cast<std::size_t>(st.st_size);
  if (mapping.size > 0) {
    void* address = ::mmap(nullptr, mapping.size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (address == MAP_FAILED) {
      const int error = errno;
      ::close(fd);
      return fail(DH_ERROR, "read_input: cannot map " + path + ": " + errnoText(error));
    }
    mapping.address = address;
  }
  ::close(fd);
  inputs_.emplace(id, mapping);
  *data = mapping.address != nullptr ? mapping.address : kEmpty;
  *size = mapping.size;
  return DH_OK;
}

dh_status TaskContext::writeOutput(dh_task* task, const char* block_id, const void* data,
                                   std::size_t size) {
  try {
    return of(task).writeOutputOf(block_id, data, size);
  } catch (const std::exception& e) {
    return of(task).fail(DH_ERROR, e.what());
  }
}

dh_status TaskContext::writeOutputOf(const char* block_id, const void* data, std::size_t size) {
  if (block_id == nullptr || !isSafeFileName(block_id)) {
    return fail(DH_INVALID_ARGUMENT, std::string("write_output: '") + (block_id ? block_id : "") +
                                         "' is not a block id ([A-Za-z0-9_.-]+; docs/blocks.md)");
  }
  if (data == nullptr && size > 0) return fail(DH_INVALID_ARGUMENT, "write_output: data is NULL");
  const std::string id = block_id;
  auto it = outputs_.find(id);
  if (it == outputs_.end()) {
    const std::string dir = spec_.work_dir + "/output";
    if (std::string why = makeOutputDir(spec_.work_dir); !why.empty()) {
      return fail(DH_ERROR, "write_output: " + why);
    }
    const std::string path = dir + "/" + id;
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0)
      return fail(DH_ERROR, "write_output: cannot open " + path + ": " + errnoText(errno));
    it = outputs_.emplace(id, fd).first;
  }
  const char* bytes = static_cast<const char*>(data);
  std::size_t left = size;
  while (left > 0) {
    ssize_t n = ::write(it->second, bytes, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      return fail(DH_ERROR, "write_output: cannot write output " + id + ": " + errnoText(errno));
    }
    bytes += n;
    left -= static_cast<std::size_t>(n);
  }
  return DH_OK;
}

void TaskContext::setResult(dh_task* task, const void* data, std::size_t size) {
  try {
    of(task).result_.assign(static_cast<const char*>(data), data == nullptr ? 0 : size);
  } catch (const std::exception& e) {
    of(task).error_ = std::string("set_result: ") + e.what();
  }
}

void TaskContext::setError(dh_task* task, const char* message) {
  try {
    of(task).error_ = message != nullptr ? message : "";
  } catch (...) {  // NOLINT(bugprone-empty-catch): out of memory; the generic reason stands
  }
}

std::int32_t TaskContext::isCancelled(dh_task* task) { return of(task).cancelled() ? 1 : 0; }

void TaskContext::onKill(dh_task* task, void (*callback)(void* user), void* user) {
  TaskContext& context = of(task);
  std::lock_guard lock(context.callback_mutex_);
  context.callback_ = callback;
  context.callback_user_ = callback != nullptr ? user : nullptr;
}

void TaskContext::log(dh_task* task, std::int32_t level, const char* message) {
  TaskContext& context = of(task);
  try {
    std::string line = "task " + std::to_string(context.spec_.task_id) + ": " +
                       (message != nullptr ? message : "");
    context.log_(level, line);
    context.appendToTaskLog(level, message);
  } catch (...) {  // NOLINT(bugprone-empty-catch): a log line lost to out of memory
  }
}

void TaskContext::appendToTaskLog(std::int32_t level, const char* message) {
  std::lock_guard lock(log_file_mutex_);
  if (!log_file_opened_) {
    log_file_opened_ = true;
    // A task of a runner that makes directories only when needed gets its own here.
    if (::mkdir(spec_.work_dir.c_str(), 0700) != 0 && errno != EEXIST) return;
    const std::string path = spec_.work_dir + "/stdout";
    log_file_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0644);
  }
  if (log_file_ < 0) return;  // the line is still in the agent's log
  timespec now{};
  ::clock_gettime(CLOCK_REALTIME, &now);
  tm utc{};
  ::gmtime_r(&now.tv_sec, &utc);
  char stamp[32];
  const std::size_t stamp_size = std::strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%S", &utc);
  std::string line(stamp, stamp_size);
  const auto millis = static_cast<unsigned>(now.tv_nsec / 1000000) % 1000U;
  line += '.';
  line += static_cast<char>('0' + millis / 100);
  line += static_cast<char>('0' + millis / 10 % 10);
  line += static_cast<char>('0' + millis % 10);
  line += "Z ";
  line += sdk::logLevelName(level);
  line += ' ';
  line += message != nullptr ? message : "";
  line += '\n';
  const char* at = line.data();
  std::size_t left = line.size();
  while (left > 0) {
    const ssize_t n = ::write(log_file_, at, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // a full disk costs the file its line, not the task
    at += n;
    left -= static_cast<std::size_t>(n);
  }
}

const char* TaskContext::lastError(dh_task* task) { return of(task).last_error_.c_str(); }

}  // namespace dockhand::plugins::library
