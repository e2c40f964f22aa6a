// The `echo` task runner: reports each task RUNNING, then FINISHED with the payload's
// "message" (and the resources the task was given) as its result. Its config may set
// "prefix", prepended to every message.
//
// Build it against the installed SDK:
//   cmake -S . -B build -DCMAKE_PREFIX_PATH=/usr && cmake --build build
#include <cstdint>
#include <string>
#include <string_view>

#include <dockhand/plugin.hpp>

namespace {

// Just enough JSON for this example: the string value of "key" in a flat object.
std::string stringField(std::string_view json, std::string_view key) {
  const std::string needle = "\"" + std::string(key) + "\"";
  auto at = json.find(needle);
  if (at == std::string_view::npos) return {};
  at = json.find('"', json.find(':', at + needle.size()) + 1);
  if (at == std::string_view::npos) return {};
  const auto end = json.find('"', at + 1);
  return std::string(json.substr(at + 1, end - at - 1));
}

std::uint64_t taskId(std::string_view json) {
  const auto at = json.find("\"task_id\":");
  if (at == std::string_view::npos) {
    throw dockhand::sdk::Error(DH_INVALID_ARGUMENT, "task_json has no task_id");
  }
  return std::stoull(std::string(json.substr(at + 10)));
}

}  // namespace

class EchoRunner : public dockhand::sdk::TaskRunner {
 public:
  // Checked by the agent before the constructor runs.
  static constexpr const char* kConfigSchema = R"({
    "type": "object",
    "properties": {"prefix": {"type": "string", "maxLength": 64}},
    "additionalProperties": false
  })";

  EchoRunner(dockhand::sdk::Host host, std::string_view config_json)
      : host_(host), prefix_(stringField(config_json, "prefix")) {
    host_.info("echo runner ready (prefix '" + prefix_ + "')");
  }

  // Runs on the call thread the agent keeps for this runner: must not block (the runner's
  // other calls wait). Echoing is instant, so it reports at once; a real runner would start
  // the work and report from its own thread.
  void launch(std::string_view task_json) override {
    const std::uint64_t id = taskId(task_json);
    const std::string message = prefix_ + stringField(task_json, "message");
    if (host_.logEnabled(DH_LOG_DEBUG)) host_.debug("task " + std::to_string(id) + ": " + message);
    host_.taskStatus(id, DH_TASK_RUNNING);
    host_.taskStatus(id, DH_TASK_FINISHED, R"({"result": ")" + message + "\"}");
  }

  // Every task ends inside launch(), so there is never one to kill.
  void kill(std::uint64_t task_id, bool, std::string_view) override {
    throw dockhand::sdk::Error(DH_NOT_FOUND, "task " + std::to_string(task_id) + " has ended");
  }

 private:
  dockhand::sdk::Host host_;
  std::string prefix_;
};

DOCKHAND_PLUGIN(EchoRunner, "echo", "1.0.0", "Finishes each task with its payload's message")
