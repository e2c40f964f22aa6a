#include "dockhand/driver/job_spec.h"

#include <filesystem>
#include <set>

#include <fmt/format.h>

#include "dockhand/driver/driver_config.h"
#include "dockhand/protocol/json_reader.h"

namespace dockhand::driver {
namespace {

using protocol::JsonPathError;
using protocol::JsonReader;

constexpr std::string_view kJobDirToken = "${JOB_DIR}";

// Replaces ${JOB_DIR} in every string inside `value`, recursively.
void substituteAll(Json& value, const std::string& job_dir) {
  if (value.is_string()) {
    value = substituteJobDir(value.get<std::string>(), job_dir);
  } else if (value.is_array() || value.is_object()) {
    for (auto& child : value) substituteAll(child, job_dir);
  }
}

TaskSpec parseTask(const JsonReader& r, std::size_t index, const std::string& job_dir) {
  r.rejectUnknown({"name", "runner", "cpus", "partition", "resources", "properties", "payload",
                   "command", "shell", "env", "cwd"});
  TaskSpec t;
  t.name = r.optionalString("name", fmt::format("task-{}", index));
  if (t.name.empty()) r.fail("name", "must not be empty");
  t.runner = r.optionalString("runner", "process");
  if (t.runner.empty()) r.fail("runner", "must not be empty");
  t.cpus = static_cast<int>(r.optionalInt("cpus", 1, 1, 1 << 20));
  t.partition = static_cast<int>(r.optionalInt("partition", static_cast<std::int64_t>(index), 0,
                                               std::numeric_limits<int>::max()));
  if (const Json* res = r.find("resources")) {
    JsonReader rr(*res, r.childPath("resources"));
    for (const auto& [name, value] : res->items()) {
      (void)value;
      if (name.empty()) rr.fail(name, "a resource name must not be empty");
      t.resources.emplace(name, static_cast<int>(rr.requiredInt(name, 1, 1 << 20)));
    }
  }
  t.properties = r.optionalStringMap("properties");

  const bool has_payload = r.has("payload");
  const bool has_command = r.has("command");
  const bool has_shell = r.has("shell");
  if (int(has_payload) + int(has_command) + int(has_shell) != 1) {
    r.fail(has_payload && (has_command || has_shell) ? "payload" : "command",
           "give exactly one of \"payload\", \"command\" or \"shell\"");
  }
  if (has_payload) {
    if (r.has("env")) r.fail("env", "belongs inside \"payload\" when \"payload\" is given");
    if (r.has("cwd")) r.fail("cwd", "belongs inside \"payload\" when \"payload\" is given");
    const Json& payload = *r.find("payload");
    if (!payload.is_object()) {
      r.fail("payload", fmt::format("expected an object, got {}", payload.type_name()));
    }
    t.payload = payload;
  } else if (has_command) {
    std::vector<std::string> argv = r.optionalStringList("command");
    if (argv.empty() || argv.front().empty()) {
      r.fail("command", "must be a non-empty array of strings (the program first)");
    }
    t.payload = {{"command", argv}};
  } else {
    std::string shell = r.requiredString("shell");
    if (shell.empty()) r.fail("shell", "must not be empty");
    t.payload = {{"shell", shell}};
  }
  if (!has_payload) {
    if (r.has("env")) t.payload["env"] = r.optionalStringMap("env");
    if (r.has("cwd")) t.payload["cwd"] = r.requiredString("cwd");
  }
  substituteAll(t.payload, job_dir);
  return t;
}

}  // namespace

std::string substituteJobDir(std::string text, const std::string& job_dir) {
  for (std::size_t pos = text.find(kJobDirToken); pos != std::string::npos;
       pos = text.find(kJobDirToken, pos + job_dir.size())) {
    text.replace(pos, kJobDirToken.size(), job_dir);
  }
  return text;
}

JobSpec parseJob(const Json& root, const std::string& source, const std::string& job_dir) {
  try {
    JsonReader r(root, "");
    r.rejectUnknown({"name", "max_attempts", "properties", "aggregate", "tasks"});
    JobSpec job;
    job.source = source;
    job.name = r.optionalString(
        "name", source.empty() ? "job" : std::filesystem::path(source).stem().string());
    if (job.name.empty()) r.fail("name", "must not be empty");
    job.max_attempts = static_cast<int>(r.optionalInt("max_attempts", 0, 1, 1000));
    job.properties = r.optionalStringMap("properties");
    std::string aggregate = r.optionalString("aggregate", "none");
    if (aggregate == "sum") {
      job.aggregate = Aggregate::kSum;
    } else if (aggregate != "none") {
      r.fail("aggregate",
             fmt::format("unknown aggregate '{}' (expected \"sum\" or \"none\")", aggregate));
    }
    const Json* tasks = r.find("tasks");
    if (tasks == nullptr) r.fail("tasks", "is required (an array of task objects)");
    if (!tasks->is_array() || tasks->empty()) {
      r.fail("tasks", "must be a non-empty array of task objects");
    }
    std::set<std::string, std::less<>> names;
    for (std::size_t i = 0; i < tasks->size(); ++i) {
      JsonReader tr((*tasks)[i], fmt::format("/tasks/{}", i));
      TaskSpec t = parseTask(tr, i, job_dir);
      if (!names.insert(t.name).second) {
        tr.fail("name", fmt::format("duplicate task name '{}'", t.name));
      }
      job.tasks.push_back(std::move(t));
    }
    return job;
  } catch (const JsonPathError& e) {
    throw ConfigError(
        fmt::format("{}: {}: {}", source.empty() ? "job" : source, e.path(), e.detail()));
  }
}

JobSpec loadJobFile(const std::string& path) {
  Json root = readJsonFile(path);
  std::error_code ec;
  std::filesystem::path abs = std::filesystem::absolute(path, ec);
  if (ec) throw ConfigError(fmt::format("{}: cannot resolve path: {}", path, ec.message()));
  std::string job_dir = abs.lexically_normal().parent_path().string();
  return parseJob(root, path, job_dir);
}

}  // namespace dockhand::driver
