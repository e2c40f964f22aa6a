// The @NAME@ task runner. A task's payload says how long it works, {"ms": 200}; each task runs
// on a thread of its own (launch() must return at once: the runner's other calls wait behind
// it), reports RUNNING, then FINISHED with {"result": "done after N ms"}, or KILLED when the
// agent kills it first. Replace the waiting with the work your tasks do.
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>

#include <dockhand/plugin.hpp>

namespace {

// The text after "key": in a flat JSON object (enough for the task JSON's numbers).
std::string valueOf(std::string_view json, std::string_view key) {
  const std::string needle = "\"" + std::string(key) + "\"";
  auto at = json.find(needle);
  if (at == std::string_view::npos) return {};
  at = json.find_first_not_of(" :", at + needle.size());
  if (at == std::string_view::npos) return {};
  return std::string(json.substr(at, json.find_first_of(",}", at) - at));
}

}  // namespace

class DockhandTemplateClass : public dockhand::sdk::TaskRunner {
 public:
  static constexpr const char* kConfigSchema = R"({
    "type": "object",
    "properties": {"max_ms": {"type": "integer", "minimum": 0, "maximum": 86400000}},
    "additionalProperties": false
  })";

  DockhandTemplateClass(dockhand::sdk::Host host, std::string_view config_json) : host_(host) {
    const std::string max_ms = valueOf(config_json, "max_ms");
    if (!max_ms.empty()) max_ms_ = std::stoll(max_ms);
  }

  // Every task thread is told to stop and joined before the agent unloads the plugin.
  ~DockhandTemplateClass() override {
    std::map<std::uint64_t, std::thread> threads;
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
      threads.swap(threads_);
    }
    wake_.notify_all();
    for (auto& [id, thread] : threads) thread.join();
  }

  // The runner's call thread: starts the task and returns.
  void launch(std::string_view task_json) override {
    const std::uint64_t id = std::stoull(valueOf(task_json, "task_id"));
    const std::string ms_text = valueOf(task_json, "ms");  // the payload's only "ms"
    const long long ms = ms_text.empty() ? 0 : std::stoll(ms_text);
    if (ms < 0 || ms > max_ms_) {
      throw dockhand::sdk::Error(
          DH_INVALID_ARGUMENT,
          "payload/ms: " + std::to_string(ms) + " is not in 0.." + std::to_string(max_ms_));
    }
    std::lock_guard lock(mutex_);
    host_.taskStatus(id, DH_TASK_RUNNING);
    threads_[id] = std::thread([this, id, ms] { work(id, ms); });
  }

  void kill(std::uint64_t task_id, bool, std::string_view reason) override {
    std::lock_guard lock(mutex_);
    if (threads_.count(task_id) == 0 || ended_.count(task_id) != 0) {
      throw dockhand::sdk::Error(DH_NOT_FOUND,
                                 "task " + std::to_string(task_id) + " is not running");
    }
    killed_[task_id] = std::string(reason);
    wake_.notify_all();
  }

 private:
  void work(std::uint64_t id, long long ms) {
    std::unique_lock lock(mutex_);
    const bool killed = wake_.wait_for(lock, std::chrono::milliseconds(ms),
                                       [&] { return stopping_ || killed_.count(id) != 0; });
    ended_[id] = true;
    const std::string reason = killed_.count(id) != 0 ? killed_[id] : "the runner stopped";
    lock.unlock();
    if (killed) {
      host_.taskStatus(id, DH_TASK_KILLED, R"({"reason": ")" + reason + "\"}");
    } else {
      host_.taskStatus(id, DH_TASK_FINISHED,
                       R"({"result": "done after )" + std::to_string(ms) + " ms\"}");
    }
  }

  dockhand::sdk::Host host_;
  long long max_ms_ = 60000;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::map<std::uint64_t, std::thread> threads_;
  std::map<std::uint64_t, std::string> killed_;
  std::map<std::uint64_t, bool> ended_;
};

DOCKHAND_PLUGIN(DockhandTemplateClass, "@NAME@", "0.1.0",
                "Runs each task for the time its payload says")
