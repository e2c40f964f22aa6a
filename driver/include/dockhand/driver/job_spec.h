// A job: the tasks `dockhand-driver run` schedules onto agents, read from a JSON job file.
//
//   {"name": "wordcount", "max_attempts": 4, "aggregate": "sum", "properties": {...},
//    "tasks": [{"name": "part-1", "shell": "wc -w < ${JOB_DIR}/data/part-1.txt"},
//              {"name": "part-2", "library": "words", "function": "count", "args": {...}}, ...]}
//
// A task may name the blocks it writes ("outputs") and the blocks it reads ("inputs"): every
// input must be some task's output, each block has one producer, and the graph has no cycle.
//
// docs/driver.md documents every key. Parsing validates everything up front and throws
// ConfigError (dockhand/base/config_error.h) naming the file and the JSON path of the first
// problem.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "dockhand/base/config_error.h"
#include "dockhand/protocol/envelope.h"
#include "dockhand/protocol/messages.h"

namespace dockhand::driver {

using Json = protocol::Json;

// The agent runner of "library" tasks (job libraries, docs/jobs.md).
inline constexpr std::string_view kLibraryRunner = "library";

// How the job's results are combined into the summary line.
enum class Aggregate { kNone, kSum };

struct TaskSpec {
  std::string name;
  std::string runner = "process";
  int cpus = 1;
  int partition = 0;
  // Resource name -> amount per task: a whole number of addresses (1, 2, ...), or a fraction
  // below 1 (0.25: a share of one address, which floor(1 / amount) such tasks can hold).
  std::map<std::string, double> resources;
  std::map<std::string, std::string> properties;
  Json payload = Json::object();     // runner-specific
  std::vector<std::string> inputs;   // block ids read (fetched into DOCKHAND_INPUT_DIR)
  std::vector<std::string> outputs;  // block ids written (into DOCKHAND_OUTPUT_DIR)
};

// True when `id` names a block as the agents' block store accepts it: shuffle_<s>_<m>_<r>,
// rdd_<r>_<p> or task_<n>_<name> (numbers of 1-19 digits; a name of 1-200 characters of
// [A-Za-z0-9._-], not starting with '.').
bool isValidBlockId(std::string_view id);

struct JobSpec {
  std::string name;
  std::string source;    // the file it was read from (for messages), or empty
  int max_attempts = 0;  // 0: the driver config's max_attempts
  Aggregate aggregate = Aggregate::kNone;
  std::map<std::string, std::string> properties;  // merged into the agents' app config
  std::vector<TaskSpec> tasks;
};

// Parses a job from JSON. `source` names the input in error messages; `job_dir` replaces
// "${JOB_DIR}" in every string of a task's command, shell, env, cwd, library, args and payload.
JobSpec parseJob(const Json& root, const std::string& source, const std::string& job_dir);

// Reads and parses a job file; ${JOB_DIR} is the file's directory as an absolute path.
JobSpec loadJobFile(const std::string& path);

// The amount per task of each resource the job's tasks ask for, for the resource profile the
// driver serves to agents (the agents' task_resources, Spark's
// spark.task.resource.<name>.amount). In Spark every task of a stage uses its profile's one
// amount; a Dockhand job may give each task its own. When the tasks that ask for a resource
// all ask the same amount, that is it. When they differ, it is the smallest: an agent shares
// an address among floor(1 / amount) tasks, so with the smallest share it never refuses a
// placement the driver made (the driver counts each address exactly, in units), at the cost
// of a looser check on the agent's side; `mixed` then lists the amounts asked for.
struct TaskResourceAmounts {
  std::map<std::string, double> amount;
  std::map<std::string, std::vector<double>> mixed;  // resource -> distinct amounts, ascending
};
TaskResourceAmounts taskResourceAmounts(const JobSpec& job);

// Sets `profile.task_resources` from the job's tasks (taskResourceAmounts) for each resource
// the profile does not name; an amount the profile (the driver config) names wins. Returns a
// line for each thing to warn about: amounts that differ between tasks, and a profile amount
// other than the one the job's tasks ask for.
std::vector<std::string> completeTaskResources(const JobSpec& job,
                                               protocol::ResourceProfile& profile);

// Replaces every "${JOB_DIR}" in `text`.
std::string substituteJobDir(std::string text, const std::string& job_dir);

}  // namespace dockhand::driver
