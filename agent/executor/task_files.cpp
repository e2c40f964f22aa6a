#include "executor/task_files.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <utility>

#include "blocks/block_id.h"
#include "dockhand/base/log_format.h"

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

Result<void> clearForReuse(const std::filesystem::path& dir) {
  namespace fs = std::filesystem;
  constexpr auto kDirMode = fs::perms::owner_all;
  constexpr auto kSubMode = fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                            fs::perms::others_read | fs::perms::others_exec;
  std::error_code ec;
  auto failed = [&](const fs::path& path) {
    return Error("cannot clear '" + path.string() + "' for reuse: " + ec.message());
  };
  if (!fs::is_directory(fs::symlink_status(dir, ec))) {
    return Error("not a directory: " + dir.string());
  }
  // The modes first: the task may have taken the agent's own rights away.
  fs::permissions(dir, kDirMode, ec);
  if (ec) return failed(dir);
  bool has_input = false;
  bool has_output = false;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    std::error_code stat_ec;
    const auto status = entry.symlink_status(stat_ec);
    bool keep = false;
    if ((name == "input" || name == "output") && fs::is_directory(status)) {
      // Emptied, not removed: the directory's inode stays.
      fs::permissions(entry.path(), kSubMode, ec);
      if (ec) return failed(entry.path());
      for (const auto& inner : fs::directory_iterator(entry.path(), ec)) {
        fs::remove_all(inner.path(), ec);
        if (ec) return failed(inner.path());
      }
      if (ec) return failed(entry.path());
      keep = true;
      (name == "input" ? has_input : has_output) = true;
    } else if (name == "stdout" || name == "stderr") {
      // Only an empty file of the agent's, that it may write, is kept: what a task wrote goes
      // with its inode, so nothing of it can appear under another task's name.
      struct stat file {};
      keep = ::lstat(entry.path().c_str(), &file) == 0 && S_ISREG(file.st_mode) &&
             file.st_nlink == 1 && file.st_size == 0 && file.st_uid == ::geteuid() &&
             (file.st_mode & S_IWUSR) != 0 && (file.st_mode & (S_ISUID | S_ISGID)) == 0;
    }
    if (!keep) {
      fs::remove_all(entry.path(), ec);
      if (ec) return failed(entry.path());
    }
  }
  if (ec) return failed(dir);
  for (const auto& [sub, present] : {std::pair{"input", has_input}, {"output", has_output}}) {
    if (present) continue;
    fs::create_directory(dir / sub, ec);
    if (!ec) fs::permissions(dir / sub, kSubMode, ec);
    if (ec) return failed(dir / sub);
  }
  return {};
}

}  // namespace dockhand::agent
