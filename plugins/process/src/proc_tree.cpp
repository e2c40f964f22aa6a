#include "proc_tree.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <sstream>
#include <string>

namespace dockhand::plugins::process {
namespace {

using nlohmann::json;

// The whole content of a small /proc file, or nullopt when it cannot be read.
std::optional<std::string> readSmallFile(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::string content;
  char buffer[4096];
  for (;;) {
    ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0) {
      ::close(fd);
      return std::nullopt;
    }
    if (n == 0) break;
    content.append(buffer, static_cast<std::size_t>(n));
    if (content.size() > (1u << 20)) break;
  }
  ::close(fd);
  return content;
}

std::string trimNewline(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\0')) s.pop_back();
  return s;
}

// Fields of /proc/<pid>/stat after the command name: state, ppid, pgrp.
struct StatFields {
  std::string name;
  std::string state;
  long ppid = 0;
  long pgrp = 0;
};

std::optional<StatFields> readStat(const std::string& path) {
  auto content = readSmallFile(path);
  if (!content) return std::nullopt;
  auto open = content->find('(');
  auto close = content->rfind(')');
  if (open == std::string::npos || close == std::string::npos || close < open) return std::nullopt;
  StatFields fields;
  fields.name = content->substr(open + 1, close - open - 1);
  const char* rest = content->c_str() + close + 1;
  char state = 0;
  long ppid = 0;
  long pgrp = 0;
  if (std::sscanf(rest, " %c %ld %ld", &state, &ppid, &pgrp) != 3) return std::nullopt;
  fields.state = std::string(1, state);
  fields.ppid = ppid;
  fields.pgrp = pgrp;
  return fields;
}

bool isNumber(const char* name) {
  if (*name == '\0') return false;
  for (const char* p = name; *p; ++p) {
    if (*p < '0' || *p > '9') return false;
  }
  return true;
}

template <class Fn>
void forEachNumericEntry(const std::string& dir, Fn&& fn) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return;
  while (dirent* entry = ::readdir(d)) {
    if (isNumber(entry->d_name)) fn(std::string(entry->d_name));
  }
  ::closedir(d);
}

json describeThread(const std::string& task_dir, const std::string& tid) {
  json thread = {{"tid", std::atol(tid.c_str())}};
  if (auto stat = readStat(task_dir + "/stat")) {
    thread["name"] = stat->name;
    thread["state"] = stat->state;
  }
  if (auto wchan = readSmallFile(task_dir + "/wchan")) {
    std::string w = trimNewline(*wchan);
    if (!w.empty() && w != "0") thread["wchan"] = w;
  }
  if (auto syscall = readSmallFile(task_dir + "/syscall")) {
    thread["syscall"] = trimNewline(*syscall);
  }
  return thread;
}

}  // namespace

json describeProcessGroup(pid_t pgid) {
  json processes = json::array();
  forEachNumericEntry("/proc", [&](const std::string& pid) {
    const std::string dir = "/proc/" + pid;
    auto stat = readStat(dir + "/stat");
    if (!stat || stat->pgrp != pgid) return;
    json process = {{"pid", std::atol(pid.c_str())},
                    {"ppid", stat->ppid},
                    {"name", stat->name},
                    {"state", stat->state}};
    json cmdline = json::array();
    if (auto raw = readSmallFile(dir + "/cmdline")) {
      std::size_t start = 0;
      while (start < raw->size()) {
        std::size_t end = raw->find('\0', start);
        if (end == std::string::npos) end = raw->size();
        cmdline.push_back(raw->substr(start, end - start));
        start = end + 1;
      }
    }
    process["cmdline"] = std::move(cmdline);
    json threads = json::array();
    forEachNumericEntry(dir + "/task", [&](const std::string& tid) {
      threads.push_back(describeThread(dir + "/task/" + tid, tid));
    });
    process["threads"] = std::move(threads);
    processes.push_back(std::move(process));
  });
  return processes;
}

std::optional<ProcessIdentity> readProcessIdentity(pid_t pid) {
  auto content = readSmallFile("/proc/" + std::to_string(pid) + "/stat");
  if (!content) return std::nullopt;
  const auto close = content->rfind(')');
  if (close == std::string::npos) return std::nullopt;
  // After the command name: state (3), ppid (4), then fields 5 to 21, then starttime (22).
  std::istringstream rest(content->substr(close + 1));
  std::string state;
  long ppid = 0;
  rest >> state >> ppid;
  std::string skipped;
  for (int field = 5; field <= 21 && rest; ++field) rest >> skipped;
  unsigned long long start_ticks = 0;
  if (!(rest >> start_ticks)) return std::nullopt;
  return ProcessIdentity{static_cast<pid_t>(ppid), start_ticks};
}

std::optional<std::uint64_t> numberAfter(const char* text, const char* key, int base) {
  const char* at = std::strstr(text, key);
  if (at == nullptr) return std::nullopt;
  const char* digits = at + std::strlen(key);
  char* end = nullptr;
  const std::uint64_t value = std::strtoull(digits, &end, base);
  if (end == digits) return std::nullopt;
  return value;
}

}  // namespace dockhand::plugins::process
