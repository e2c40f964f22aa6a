// The `slurm` discovery plugin: the GPUs Slurm gave this agent's task, read from the
// environment slurmstepd sets for it.
//
// Slurm names a task's GPUs in three variables. CUDA_VISIBLE_DEVICES is what CUDA in this task
// numbers as its devices (0,1 when the node's device cgroup hides the others; the node's own
// indices otherwise), so it is the address a Dockhand task must get in its own
// CUDA_VISIBLE_DEVICES. SLURM_STEP_GPUS (the step's GPUs) and SLURM_JOB_GPUS (the job's, as the
// batch script sees them) are the node's indices, used when CUDA_VISIBLE_DEVICES is not set.
// The first of `variables` that is set and not empty wins. Outside a Slurm job (no
// SLURM_JOB_ID) and when no variable names a GPU, the plugin declines, with a log line saying
// why. A list with an empty or repeated entry is an error.
//
// Config (all optional):
//   {"resource": "gpu",
//    "variables": ["CUDA_VISIBLE_DEVICES", "SLURM_STEP_GPUS", "SLURM_JOB_GPUS"]}
#include <cstdlib>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "dockhand/plugin.hpp"

namespace {

using dockhand::sdk::Error;
using nlohmann::json;

// Slurm's "no device files" marker, set in CUDA_VISIBLE_DEVICES by some versions when a job's
// GRES has no device files: no GPU.
constexpr const char* kNoDevFiles = "NoDevFiles";
// An expanded range of indices larger than this is a mistake, not a machine.
constexpr long kMaxRange = 4096;

std::optional<std::string> environment(const std::string& name) {
  const char* value = std::getenv(name.c_str());
  if (value == nullptr) return std::nullopt;
  return std::string(value);
}

std::string trim(const std::string& text) {
  const auto first = text.find_first_not_of(" \t\r\n");
  if (first == std::string::npos) return "";
  const auto last = text.find_last_not_of(" \t\r\n");
  return text.substr(first, last - first + 1);
}

bool allDigits(const std::string& text) {
  return !text.empty() && text.find_first_not_of("0123456789") == std::string::npos;
}

// An error about the list VALUE of VARIABLE: "slurm: VARIABLE='VALUE'WHAT".
Error listError(const std::string& variable, const std::string& value, const std::string& what) {
  std::string message = "slurm: ";
  message += variable;
  message += "='";
  message += value;
  message += "'";
  message += what;
  return {DH_ERROR, message};
}

// The entries of a comma-separated list such as "0,1", "2-3,5" or "GPU-5fd4...,GPU-a1b2...".
// A range of two indices ("2-3") is expanded; anything else (UUIDs, MIG names) is kept as it
// is. `variable` names the list in errors.
std::vector<std::string> parseList(const std::string& variable, const std::string& value) {
  std::vector<std::string> addresses;
  std::set<std::string> seen;
  auto add = [&](const std::string& address) {
    if (!seen.insert(address).second) {
      std::string what = " lists GPU '";
      what += address;
      what += "' twice";
      throw listError(variable, value, what);
    }
    addresses.push_back(address);
  };
  std::size_t position = 0;
  int entry = 0;
  while (position <= value.size()) {
    const std::size_t comma = value.find(',', position);
    const std::size_t end = comma == std::string::npos ? value.size() : comma;
    const std::string item = trim(value.substr(position, end - position));
    ++entry;
    if (item.empty()) {
      std::string what = ": entry ";
      what += std::to_string(entry);
      what += " is empty";
      throw listError(variable, value, what);
    }
    const std::size_t dash = item.find('-');
    if (dash != std::string::npos && allDigits(item.substr(0, dash)) &&
        allDigits(item.substr(dash + 1))) {
      const long first = std::strtol(item.substr(0, dash).c_str(), nullptr, 10);
      const long last = std::strtol(item.substr(dash + 1).c_str(), nullptr, 10);
      if (last < first || last - first >= kMaxRange) {
        std::string what = ": '";
        what += item;
        what += "' is not a range of GPU indices";
        throw listError(variable, value, what);
      }
      for (long index = first; index <= last; ++index) add(std::to_string(index));
    } else {
      add(item);
    }
    if (comma == std::string::npos) break;
    position = comma + 1;
  }
  return addresses;
}

struct Found {
  bool in_job = false;   // SLURM_JOB_ID is set
  std::string variable;  // the variable the addresses came from ("" when none did)
  std::vector<std::string> addresses;
  std::string why;  // why there are none
};

class SlurmDiscovery : public dockhand::sdk::ResourceDiscovery {
 public:
  static constexpr const char* kConfigSchema = R"({
    "type": "object",
    "properties": {
      "resource": {"type": "string", "minLength": 1},
      "variables": {"type": "array", "minItems": 1,
                    "items": {"type": "string", "minLength": 1}}
    },
    "additionalProperties": false
  })";

  SlurmDiscovery(dockhand::sdk::Host host, std::string_view config_json) : host_(host) {
    const json config = json::parse(config_json);
    resource_ = config.value("resource", std::string("gpu"));
    variables_ = config.value(
        "variables",
        std::vector<std::string>{"CUDA_VISIBLE_DEVICES", "SLURM_STEP_GPUS", "SLURM_JOB_GPUS"});
  }

  std::optional<std::string> discover(std::string_view request_json) override {
    const json request = json::parse(request_json);
    const std::string name = request.at("name").get<std::string>();
    if (name != resource_) return std::nullopt;
    const Found found = find();
    if (found.addresses.empty()) {
      host_.info(found.why + "; declining resource '" + name + "'");
      return std::nullopt;
    }
    warnOnMismatch(found);
    host_.info("resource '" + name + "': " + std::to_string(found.addresses.size()) +
               " GPU(s) from " + found.variable + " (Slurm job " +
               environment("SLURM_JOB_ID").value_or("") + ")");
    return json{{"name", name}, {"addresses", found.addresses}}.dump();
  }

  std::string describe() override {
    json variables = json::object();
    for (const auto& variable : variables_) {
      const auto value = environment(variable);
      variables[variable] = value ? json(*value) : json(nullptr);
    }
    json out = {{"job_id", environment("SLURM_JOB_ID").value_or("")},
                {"step_id", environment("SLURM_STEP_ID").value_or("")},
                {"procid", environment("SLURM_PROCID").value_or("")},
                {"variables", variables}};
    try {
      const Found found = find();
      out["in_slurm_job"] = found.in_job;
      out["source"] = found.variable;
      out["addresses"] = found.addresses;
      if (found.addresses.empty()) out["reason"] = found.why;
    } catch (const Error& e) {
      out["error"] = e.what();
    }
    return out.dump();
  }

 private:
  Found find() const {
    Found found;
    const auto job_id = environment("SLURM_JOB_ID");
    found.in_job = job_id.has_value() && !job_id->empty();
    if (!found.in_job) {
      found.why = "not in a Slurm job (SLURM_JOB_ID is not set)";
      return found;
    }
    for (const auto& variable : variables_) {
      const auto value = environment(variable);
      if (!value || trim(*value).empty() || trim(*value) == kNoDevFiles) continue;
      found.variable = variable;
      found.addresses = parseList(variable, *value);
      return found;
    }
    std::string names;
    for (const auto& variable : variables_) names += (names.empty() ? "" : ", ") + variable;
    found.why = "Slurm job " + *job_id + " gave this task no GPU (none of " + names + " is set)";
    return found;
  }

  // CUDA_VISIBLE_DEVICES and SLURM_STEP_GPUS name the same GPUs in two numberings, so they
  // have as many entries; when they do not, something other than Slurm set one of them.
  void warnOnMismatch(const Found& found) const {
    if (found.variable != "CUDA_VISIBLE_DEVICES") return;
    const auto step = environment("SLURM_STEP_GPUS");
    if (!step || trim(*step).empty()) return;
    try {
      const auto step_gpus = parseList("SLURM_STEP_GPUS", *step);
      if (step_gpus.size() != found.addresses.size()) {
        host_.warn("CUDA_VISIBLE_DEVICES names " + std::to_string(found.addresses.size()) +
                   " GPU(s) but SLURM_STEP_GPUS='" + *step + "' names " +
                   std::to_string(step_gpus.size()) + "; offering those of CUDA_VISIBLE_DEVICES");
      }
    } catch (const Error& e) {
      host_.warn(std::string(e.what()) + "; offering those of CUDA_VISIBLE_DEVICES");
    }
  }

  dockhand::sdk::Host host_;
  std::string resource_;
  std::vector<std::string> variables_;
};

}  // namespace

DOCKHAND_PLUGIN(SlurmDiscovery, "slurm", "0.1.0",
                "The GPUs Slurm gave this task (CUDA_VISIBLE_DEVICES, SLURM_STEP_GPUS)")
