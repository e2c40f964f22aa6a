#include "dockhand/driver/job_spec.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

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

// The payload of the "library" shorthand: {"library", "function", "args"} for the library
// runner. `runner` is the task's "runner" as given (it may only name the library runner).
Json parseLibraryTask(const JsonReader& r, const std::string& runner) {
  if (r.has("runner") && runner != kLibraryRunner) {
    r.fail("runner", fmt::format(R"(is '{}', but "library" tasks run on the '{}' runner (leave )"
                                 R"("runner" out, or use "payload" for another runner))",
                                 runner, kLibraryRunner));
  }
  for (const char* key : {"env", "cwd"}) {
    if (r.has(key)) {
      r.fail(key, R"(applies to "command" and "shell" tasks; a library task gets its input in )"
                  R"("args")");
    }
  }
  std::string library = r.requiredString("library");
  if (library.empty()) {
    r.fail("library", "must name a library of the runner's \"libraries\" or an absolute path");
  }
  if (!r.has("function")) {
    r.fail("function", R"(is required with "library": the name of the task function to call)");
  }
  std::string function = r.requiredString("function");
  const bool name_ok =
      !function.empty() && std::all_of(function.begin(), function.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               c == '_' || c == '.' || c == '-';
      });
  if (!name_ok) {
    r.fail("function", fmt::format("'{}' is not a task function name (1 or more of "
                                   "[A-Za-z0-9_.-], as the library exports it)",
                                   function));
  }
  Json payload = {{"library", std::move(library)}, {"function", std::move(function)}};
  if (const Json* args = r.find("args")) payload["args"] = *args;
  return payload;
}

TaskSpec parseTask(const JsonReader& r, std::size_t index, const std::string& job_dir) {
  r.rejectUnknown({"name", "runner", "cpus", "partition", "resources", "properties", "payload",
                   "command", "shell", "library", "function", "args", "env", "cwd", "inputs",
                   "outputs"});
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
      if (name.empty()) rr.fail(name, "a resource name must not be empty");
      if (!value.is_number())
        rr.fail(name, "expected a number of addresses (or a fraction below 1)");
      const double amount = value.get<double>();
      if (!(amount > 0) || amount > (1 << 20)) {
        rr.fail(name, fmt::format("{} is out of range (above 0, at most {})", amount, 1 << 20));
      }
      if (amount > 1 && amount != std::floor(amount)) {
        rr.fail(name, fmt::format("{} is above 1 but not a whole number of addresses", amount));
      }
      t.resources.emplace(name, amount);
    }
  }
  t.properties = r.optionalStringMap("properties");

  const bool has_payload = r.has("payload");
  const bool has_command = r.has("command");
  const bool has_shell = r.has("shell");
  const bool has_library = r.has("library");
  if (int(has_payload) + int(has_command) + int(has_shell) + int(has_library) != 1) {
    const char* at = "command";
    if (has_payload && (has_command || has_shell || has_library)) {
      at = "payload";
    } else if (has_library) {
      at = "library";
    }
    r.fail(at, R"(give exactly one of "payload", "command", "shell" or "library")");
  }
  if (!has_library) {
    for (const char* key : {"function", "args"}) {
      if (r.has(key)) r.fail(key, R"(belongs to a library task (give "library" too))");
    }
  }
  if (has_payload) {
    if (r.has("env")) r.fail("env", R"(belongs inside "payload" when "payload" is given)");
    if (r.has("cwd")) r.fail("cwd", R"(belongs inside "payload" when "payload" is given)");
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
  } else if (has_shell) {
    std::string shell = r.requiredString("shell");
    if (shell.empty()) r.fail("shell", "must not be empty");
    t.payload = {{"shell", shell}};
  } else {
    t.payload = parseLibraryTask(r, t.runner);
    t.runner = kLibraryRunner;
  }
  if (!has_payload && !has_library) {
    if (r.has("env")) t.payload["env"] = r.optionalStringMap("env");
    if (r.has("cwd")) t.payload["cwd"] = r.requiredString("cwd");
  }
  substituteAll(t.payload, job_dir);
  for (const char* key : {"inputs", "outputs"}) {
    std::vector<std::string> ids = r.optionalStringList(key);
    std::set<std::string, std::less<>> seen;
    for (std::size_t i = 0; i < ids.size(); ++i) {
      const std::string where = fmt::format("{}/{}", r.childPath(key), i);
      if (!isValidBlockId(ids[i])) {
        throw JsonPathError(where, fmt::format("'{}' is not a block id (expected "
                                               "shuffle_<s>_<m>_<r>, rdd_<r>_<p> or "
                                               "task_<n>_<name>)",
                                               ids[i]));
      }
      if (!seen.insert(ids[i]).second) {
        throw JsonPathError(where, fmt::format("'{}' is listed twice", ids[i]));
      }
    }
    (std::string_view(key) == "inputs" ? t.inputs : t.outputs) = std::move(ids);
  }
  return t;
}

// Every input has a producer, every block one producer, and no task waits on itself through
// a chain of blocks. Throws JsonPathError at the offending entry.
void checkBlockGraph(const std::vector<TaskSpec>& tasks) {
  std::map<std::string, std::size_t, std::less<>> producer;
  for (std::size_t i = 0; i < tasks.size(); ++i) {
    for (std::size_t k = 0; k < tasks[i].outputs.size(); ++k) {
      const std::string& id = tasks[i].outputs[k];
      auto [it, fresh] = producer.emplace(id, i);
      if (!fresh) {
        throw JsonPathError(fmt::format("/tasks/{}/outputs/{}", i, k),
                            fmt::format("block '{}' is already an output of task '{}'", id,
                                        tasks[it->second].name));
      }
    }
  }
  // Kahn's algorithm over "producer before consumer" edges.
  std::vector<std::vector<std::size_t>> consumers(tasks.size());
  std::vector<std::size_t> waiting(tasks.size(), 0);
  for (std::size_t i = 0; i < tasks.size(); ++i) {
    for (std::size_t k = 0; k < tasks[i].inputs.size(); ++k) {
      const std::string& id = tasks[i].inputs[k];
      auto it = producer.find(id);
      if (it == producer.end()) {
        throw JsonPathError(fmt::format("/tasks/{}/inputs/{}", i, k),
                            fmt::format(R"(no task lists block '{}' in its "outputs")", id));
      }
      consumers[it->second].push_back(i);
      ++waiting[i];
    }
  }
  std::vector<std::size_t> ready;
  for (std::size_t i = 0; i < tasks.size(); ++i) {
    if (waiting[i] == 0) ready.push_back(i);
  }
  std::size_t ordered = 0;
  while (!ready.empty()) {
    std::size_t i = ready.back();
    ready.pop_back();
    ++ordered;
    for (std::size_t c : consumers[i]) {
      if (--waiting[c] == 0) ready.push_back(c);
    }
  }
  if (ordered == tasks.size()) return;
  for (std::size_t i = 0; i < tasks.size(); ++i) {
    if (waiting[i] > 0) {
      throw JsonPathError(fmt::format("/tasks/{}/inputs", i),
                          fmt::format("task '{}' depends on its own outputs through its inputs "
                                      "(a cycle); no order can run it",
                                      tasks[i].name));
    }
  }
}

}  // namespace

bool isValidBlockId(std::string_view id) {
  // The agents' block store accepts exactly these forms (agent/blocks/block_id.h).
  auto is_number = [](std::string_view text) {
    return !text.empty() && text.size() <= 19 &&
           std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
  };
  auto numbers = [&](std::string_view rest, std::size_t count) {
    for (std::size_t i = 0; i < count; ++i) {
      std::size_t sep = i + 1 < count ? rest.find('_') : rest.size();
      if (sep == std::string_view::npos || !is_number(rest.substr(0, sep))) return false;
      rest = i + 1 < count ? rest.substr(sep + 1) : std::string_view();
    }
    return true;
  };
  if (id.size() > 255) return false;
  if (id.rfind("shuffle_", 0) == 0) return numbers(id.substr(8), 3);
  if (id.rfind("rdd_", 0) == 0) return numbers(id.substr(4), 2);
  if (id.rfind("task_", 0) == 0) {
    std::string_view rest = id.substr(5);
    std::size_t sep = rest.find('_');
    if (sep == std::string_view::npos || !is_number(rest.substr(0, sep))) return false;
    std::string_view name = rest.substr(sep + 1);
    if (name.empty() || name.size() > 200 || name.front() == '.') return false;
    return std::all_of(name.begin(), name.end(), [](char c) {
      return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
             c == '.' || c == '_' || c == '-';
    });
  }
  return false;
}

TaskResourceAmounts taskResourceAmounts(const JobSpec& job) {
  std::map<std::string, std::set<double>> asked;
  for (const TaskSpec& task : job.tasks) {
    for (const auto& [name, amount] : task.resources) asked[name].insert(amount);
  }
  TaskResourceAmounts out;
  for (const auto& [name, amounts] : asked) {
    out.amount[name] = *amounts.begin();
    if (amounts.size() > 1) out.mixed[name].assign(amounts.begin(), amounts.end());
  }
  return out;
}

std::vector<std::string> completeTaskResources(const JobSpec& job,
                                               protocol::ResourceProfile& profile) {
  std::vector<std::string> warnings;
  const TaskResourceAmounts derived = taskResourceAmounts(job);
  for (const auto& [name, amount] : derived.amount) {
    auto [it, added] = profile.task_resources.try_emplace(name, amount);
    if (!added && it->second != amount) {
      warnings.push_back(fmt::format(
          "job {}: the driver config's resource_profile.task_resources.{} is {:g}, but the "
          "job's tasks ask for {:g}; the agents are told {:g}, and may refuse tasks that share "
          "an address more than that allows",
          job.name, name, it->second, amount, it->second));
    } else if (auto mixed = derived.mixed.find(name); added && mixed != derived.mixed.end()) {
      warnings.push_back(fmt::format(
          "job {}: tasks ask for resource '{}' in different amounts ({:g}); the agents are told "
          "the smallest, {:g} per task, so each lets as many tasks share an address as that "
          "allows and the driver alone keeps the exact count (set "
          "resource_profile.task_resources.{} in the driver config to choose)",
          job.name, name, fmt::join(mixed->second, ", "), amount, name));
    }
  }
  return warnings;
}

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
             fmt::format(R"(unknown aggregate '{}' (expected "sum" or "none"))", aggregate));
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
    checkBlockGraph(job.tasks);
    return job;
  } catch (const JsonPathError& e) {
    throw ConfigError({ConfigProblem{source.empty() ? "job" : source, e.path(), e.detail()}});
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
