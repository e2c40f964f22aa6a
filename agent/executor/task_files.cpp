#include "executor/task_files.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <map>
#include <string_view>
#include <utility>

#include "blocks/block_id.h"
#include "dockhand/base/log_format.h"
#include "dockhand/base/unique_fd.h"

namespace dockhand::agent {

using Json = nlohmann::json;

namespace {

// "gpu" -> "GPU", "my.fpga" -> "MY_FPGA": a valid environment variable name suffix.
std::string envSuffix(const std::string& name) {
  std::string out;
  out.reserve(name.size());
  for (unsigned char c : name) {
    out.push_back(std::isalnum(c) ? static_cast<char>(std::toupper(c)) : '_');
  }
  return out;
}

std::string joined(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& item : items) {
    if (!out.empty()) out += ',';
    out += item;
  }
  return out;
}

}  // namespace

std::string runnerTaskJson(const protocol::TaskDescription& task,
                           const std::filesystem::path& task_dir, const std::string& executor_id,
                           TaskEnv env) {
  // Written as text at once (it is built for every launch, on the core thread): no JSON tree
  // to build, dump and free. Strings as appendJsonString writes them (invalid UTF-8 replaced).
  std::string out;
  out.reserve(1024);
  out += '{';
  const auto member = [&out](std::string_view name) {
    if (out.back() != '{') out += ',';
    appendJsonString(name, out);
    out += ':';
  };
  const auto string_member = [&](std::string_view name, std::string_view value) {
    member(name);
    appendJsonString(value, out);
  };
  const auto string_map = [&](const std::map<std::string, std::string>& map) {
    out += '{';
    for (const auto& [key, value] : map) string_member(key, value);
    out += '}';
  };
  const auto string_array = [&out](const auto& items, const auto& text) {
    out += '[';
    for (const auto& item : items) {
      if (out.back() != '[') out += ',';
      appendJsonString(text(item), out);
    }
    out += ']';
  };
  const auto same = [](const std::string& item) -> const std::string& { return item; };
  member("attempt");
  out += std::to_string(task.attempt);
  member("cpus");
  out += std::to_string(task.cpus);
  if (env == TaskEnv::kIncluded) {
    member("env");
    out += '{';
    string_member("DOCKHAND_TASK_ID", std::to_string(task.task_id));
    string_member("DOCKHAND_TASK_ATTEMPT", std::to_string(task.attempt));
    string_member("DOCKHAND_TASK_NAME", task.name);
    string_member("DOCKHAND_PARTITION", std::to_string(task.partition));
    string_member("DOCKHAND_EXECUTOR_ID", executor_id);
    string_member("DOCKHAND_CPUS", std::to_string(task.cpus));
    string_member("DOCKHAND_OUTPUT_DIR", (task_dir / "output").string());
    string_member("DOCKHAND_INPUT_DIR", (task_dir / "input").string());
    // Two resources may give one variable name ("my.fpga", "my_fpga"): the last one's, once.
    std::map<std::string, std::string> from_resources;
    for (const auto& [name, addresses] : task.resources) {
      std::string list = joined(addresses);
      if (name == "gpu") from_resources["CUDA_VISIBLE_DEVICES"] = list;
      from_resources["DOCKHAND_RESOURCE_" + envSuffix(name)] = std::move(list);
    }
    for (const auto& [name, value] : from_resources) string_member(name, value);
    out += '}';
  }
  member("inputs");
  string_array(task.inputs,
               [](const protocol::InputBlock& input) -> const std::string& { return input.id; });
  string_member("name", task.name);
  member("partition");
  out += std::to_string(task.partition);
  member("payload");
  out += task.payload.dump(-1, ' ', false, Json::error_handler_t::replace);
  member("properties");
  string_map(task.properties);
  member("resources");
  out += '{';
  for (const auto& [name, addresses] : task.resources) {
    member(name);
    string_array(addresses, same);
  }
  out += '}';
  member("task_id");
  out += std::to_string(task.task_id);
  string_member("work_dir", task_dir.string());
  out += '}';
  return out;
}

Result<void> ingestOutputs(BlockStore& store, const std::filesystem::path& output_dir,
                           const std::string& block_url, const std::string& executor_id,
                           std::vector<protocol::BlockInfo>& blocks) {
  std::error_code ec;
  if (!std::filesystem::is_directory(output_dir, ec)) return {};
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(output_dir, ec)) {
    std::string name = entry.path().filename().string();
    std::error_code type_ec;
    if (!std::filesystem::is_regular_file(entry.symlink_status(type_ec))) {
      return Error("output '" + name + "' in DOCKHAND_OUTPUT_DIR is not a regular file");
    }
    if (!isValidBlockId(name)) {
      return Error("output file '" + name + "' in DOCKHAND_OUTPUT_DIR is not a valid block id (" +
                   std::string(kBlockIdForms) + ")");
    }
    files.push_back(entry.path());
  }
  if (ec) return Error("cannot list " + output_dir.string() + ": " + ec.message());
  std::sort(files.begin(), files.end());
  for (const auto& file : files) {
    std::string id = file.filename().string();
    try {
      BlockMeta meta = store.adopt(id, file);
      blocks.push_back(describeBlock(meta, executor_id, block_url));
    } catch (const BlockStoreError& e) {
      return Error("cannot store output block " + id + ": " + e.what());
    }
  }
  return {};
}

namespace {

// Calls each(name, type) for every entry of the directory open at `fd` but "." and "..", read
// with getdents64 (`type` is the entry's d_type: DT_UNKNOWN where the file system does not say),
// until it returns false. Returns 0, or the errno that ended the listing.
template <class Each>
int forEachEntry(int fd, Each&& each) {
  alignas(dirent64) char buffer[8192];
  for (;;) {
    const ssize_t n = ::getdents64(fd, buffer, sizeof buffer);
    if (n == 0) return 0;
    if (n < 0) return errno;
    for (ssize_t at = 0; at < n;) {
      dirent64 entry{};
      std::memcpy(&entry, buffer + at, std::min(sizeof entry, static_cast<std::size_t>(n - at)));
      const std::string_view name(buffer + at + offsetof(dirent64, d_name));
      at += entry.d_reclen;
      if (name != "." && name != ".." && !each(std::string(name), entry.d_type)) return 0;
    }
  }
}

// Whether the directory `name` in the directory open at `at` may hold an entry: true when it
// has one or cannot be listed, false when it is empty (or missing: `missing`).
bool mayHoldEntriesAt(int at, const char* name, int flags, bool missing) {
  const UniqueFd dir(::openat(at, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | flags));
  if (dir.get() < 0) return errno == ENOENT ? missing : true;
  bool holds = false;
  const int error = forEachEntry(dir.get(), [&](const std::string&, unsigned char) {
    holds = true;
    return false;
  });
  return error != 0 || holds;
}

// The d_type of `name` in the directory open at `fd`, asked of the file itself where the
// listing did not say (DT_UNKNOWN); links are not followed.
unsigned char typeOf(int fd, const std::string& name, unsigned char listed) {
  if (listed != DT_UNKNOWN) return listed;
  struct stat st {};
  if (::fstatat(fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return DT_UNKNOWN;
  return S_ISDIR(st.st_mode) ? DT_DIR : S_ISREG(st.st_mode) ? DT_REG : DT_UNKNOWN;
}

// The modes of a task's directory and of its input/ and output/ as the agent makes them.
constexpr mode_t kDirMode = 0700;
constexpr mode_t kSubMode = 0755;

// Whether `file` (an lstat of a task's stdout or stderr) may serve another task as it is: an
// empty regular file of one link, the agent's, that it may write. What a task wrote goes with
// its inode, so nothing of it can appear under another task's name.
bool reusableLog(const struct stat& file, uid_t agent) {
  return S_ISREG(file.st_mode) && file.st_nlink == 1 && file.st_size == 0 && file.st_uid == agent &&
         (file.st_mode & S_IWUSR) != 0 && (file.st_mode & (S_ISUID | S_ISGID)) == 0;
}

// Whether `st` is a directory of the agent's with exactly `mode`.
bool agentDirectory(const struct stat& st, uid_t agent, mode_t mode) {
  return S_ISDIR(st.st_mode) && st.st_uid == agent && (st.st_mode & 07777) == mode;
}

}  // namespace

LeftInDir lookAtEndedDir(const std::filesystem::path& dir) {
  // Reads only, each name resolved from a descriptor of `dir`, links never followed: 18 system
  // calls for a task that wrote nothing; it stops at the first thing found (a task that left
  // many files costs no listing of them all).
  const UniqueFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (fd.get() < 0) return errno == ENOENT ? LeftInDir::kNoDirectory : LeftInDir::kSomething;
  const uid_t agent = ::geteuid();
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0 || !agentDirectory(st, agent, kDirMode)) {
    return LeftInDir::kSomething;
  }
  int found = 0;  // input/ and output/, each as a new task's directory has it
  bool other = false;
  const int error = forEachEntry(fd.get(), [&](const std::string& name, unsigned char) {
    struct stat entry {};
    const bool seen = ::fstatat(fd.get(), name.c_str(), &entry, AT_SYMLINK_NOFOLLOW) == 0;
    if (seen && (name == "stdout" || name == "stderr")) {
      other = !reusableLog(entry, agent);  // or absent: a runner that writes no such file
    } else if (seen && (name == "input" || name == "output")) {
      other = !agentDirectory(entry, agent, kSubMode) ||
              mayHoldEntriesAt(fd.get(), name.c_str(), O_NOFOLLOW, /*missing=*/true);
      if (!other) ++found;
    } else {
      other = true;  // what cannot be looked at, or what a new task's directory never holds
    }
    return !other;  // the first thing found decides
  });
  return error == 0 && !other && found == 2 ? LeftInDir::kNothing : LeftInDir::kSomething;
}

bool mayHoldEntries(const std::filesystem::path& dir) {
  return mayHoldEntriesAt(AT_FDCWD, dir.c_str(), 0, /*missing=*/false);
}

Result<void> clearForReuse(const std::filesystem::path& dir) {
  // Every name below is resolved from a descriptor of `dir` (links are not followed), in a
  // directory whose task ended long ago: 19 system calls for a task that wrote nothing,
  // where paths cost 33.
  int error = 0;
  auto failed = [&](const std::filesystem::path& path) {
    return Error("cannot clear '" + path.string() + "' for reuse: " + std::strerror(error));
  };
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return Error("not a directory: " + dir.string());
  }
  // The modes first: the task may have taken the agent's own rights away.
  if (::chmod(dir.c_str(), kDirMode) != 0) {
    error = errno;
    return failed(dir);
  }
  const UniqueFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (fd.get() < 0) {
    error = errno;
    return failed(dir);
  }
  const uid_t agent = ::geteuid();
  bool has_input = false;
  bool has_output = false;
  std::vector<std::string> doomed;
  error = forEachEntry(fd.get(), [&](std::string name, unsigned char listed) {
    bool keep = false;
    if (name == "input" || name == "output") {
      // Emptied, not removed: the directory's inode stays.
      keep = typeOf(fd.get(), name, listed) == DT_DIR &&
             ::fchmodat(fd.get(), name.c_str(), kSubMode, 0) == 0;
      const UniqueFd sub(
          keep ? ::openat(fd.get(), name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
               : -1);
      keep =
          sub.get() >= 0 && forEachEntry(sub.get(), [&](const std::string& inner, unsigned char) {
                              doomed.push_back(name + "/" + inner);
                              return true;
                            }) == 0;
      if (keep) (name == "input" ? has_input : has_output) = true;
    } else if (name == "stdout" || name == "stderr") {
      struct stat file {};
      keep = ::fstatat(fd.get(), name.c_str(), &file, AT_SYMLINK_NOFOLLOW) == 0 &&
             reusableLog(file, agent);
    }
    if (!keep) doomed.push_back(std::move(name));
    return true;
  });
  if (error != 0) return failed(dir);
  // What goes, by path: std::filesystem's removal does not follow links either.
  std::error_code ec;
  for (const auto& name : doomed) {
    std::filesystem::remove_all(dir / name, ec);
    if (ec) return Error("cannot clear '" + (dir / name).string() + "' for reuse: " + ec.message());
  }
  for (const auto& [sub, present] : {std::pair{"input", has_input}, {"output", has_output}}) {
    if (present) continue;
    if (::mkdirat(fd.get(), sub, kSubMode) != 0 || ::fchmodat(fd.get(), sub, kSubMode, 0) != 0) {
      error = errno;
      return failed(dir / sub);
    }
  }
  return {};
}

}  // namespace dockhand::agent
