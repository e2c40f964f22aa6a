// dockhand/plugin_test.hpp: a plugin's own tests, with no agent. A PluginUnderTest loads the
// built plugin file with the system loader, checks its descriptor as the agent does (the
// entry symbol, the ABI major, the required fields), creates one instance with a config, and
// calls its hooks on the calling thread, as the agent's one call thread would; what the plugin
// reports (task statuses, migration progress, log lines) is recorded for the test to read.
//
//   dockhand::sdk::testing::PluginUnderTest plugin(argv[1], R"({"directory": "/tmp/x"})");
//   std::string answer = plugin.migrate(R"({"blocks": [...], "peers": []})");
//   plugin.launch(task_json);  plugin.waitForEnd(7, 5000);  plugin.statuses(7)
//
// Not the agent: no config-schema check (dockhand plugins check does that, with the agent's
// own rules), no time bound on a hook. A failed hook throws std::runtime_error with the
// plugin's last_error. Header-only, C++17; link the test with ${CMAKE_DL_LIBS}. The recorded
// callbacks are thread-safe (a plugin may call them from its own threads).
#pragma once

#include <dlfcn.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "dockhand/plugin.hpp"

namespace dockhand::sdk::testing {

class PluginUnderTest {
 public:
  struct Status {
    std::uint64_t task_id = 0;
    std::int32_t state = 0;   // DH_TASK_*
    std::string detail_json;  // "" when the plugin passed none
  };

  PluginUnderTest(const std::string& file, const std::string& config_json = "{}") {
    handle_ = ::dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle_ == nullptr) {
      const char* why = ::dlerror();
      throw std::runtime_error("cannot load " + file + ": " + (why != nullptr ? why : "?"));
    }
    auto entry = reinterpret_cast<dh_plugin_entry_fn>(::dlsym(handle_, DH_PLUGIN_ENTRY_SYMBOL));
    if (entry == nullptr) fail(file + ": no " DH_PLUGIN_ENTRY_SYMBOL " symbol");
    descriptor_ = entry();
    if (descriptor_ == nullptr) fail(file + ": " DH_PLUGIN_ENTRY_SYMBOL " returned NULL");
    if (descriptor_->abi_major != DH_ABI_MAJOR) {
      fail(file + ": built against ABI major " + std::to_string(descriptor_->abi_major) +
           ", this SDK is " + std::to_string(DH_ABI_MAJOR));
    }
    if (descriptor_->name == nullptr || descriptor_->version == nullptr ||
        descriptor_->create == nullptr || descriptor_->destroy == nullptr ||
        descriptor_->last_error == nullptr || descriptor_->kinds == 0) {
      fail(file +
           ": the descriptor misses a required field (name, version, kinds, create, "
           "destroy, last_error)");
    }
    config_ = config_json;
    host_.struct_size = sizeof(dh_host);
    host_.ctx = this;
    host_.log = &onLog;
    host_.task_status = &onTaskStatus;
    host_.migration_progress = &onProgress;
    host_.config = &onConfig;
    host_.log_enabled = [](void*, std::int32_t) -> std::int32_t { return 1; };
    if (descriptor_->create(&host_, config_.c_str(), &instance_) != DH_OK || instance_ == nullptr) {
      const char* why = instance_ != nullptr ? descriptor_->last_error(instance_) : nullptr;
      if (instance_ != nullptr) descriptor_->destroy(instance_);
      instance_ = nullptr;
      fail(std::string("create failed") + (why != nullptr ? std::string(": ") + why : ""));
    }
  }

  ~PluginUnderTest() {
    if (instance_ != nullptr) descriptor_->destroy(instance_);
    if (handle_ != nullptr) ::dlclose(handle_);
  }
  PluginUnderTest(const PluginUnderTest&) = delete;
  PluginUnderTest& operator=(const PluginUnderTest&) = delete;

  const dh_plugin_descriptor& descriptor() const { return *descriptor_; }

  // ---- resource discovery ----
  // The answer, or "" when the plugin declined the resource (DH_DECLINED).
  std::string discover(const std::string& request_json) {
    const auto* table = need(descriptor_->resource_discovery, "resource discovery");
    const char* out = nullptr;
    const dh_status status = table->discover(instance_, request_json.c_str(), &out);
    if (status == DH_DECLINED) return "";
    check(status, "discover");
    return out != nullptr ? out : "";
  }

  // ---- task runner ----
  void launch(const std::string& task_json) {
    check(need(descriptor_->task_runner, "task runner")->launch(instance_, task_json.c_str()),
          "launch");
  }
  void kill(std::uint64_t task_id, bool interrupt = false, const std::string& reason = "test") {
    check(need(descriptor_->task_runner, "task runner")
              ->kill(instance_, task_id, interrupt ? 1 : 0, reason.c_str()),
          "kill");
  }
  // Waits up to `timeout_ms` for the task's terminal status; true when it came.
  bool waitForEnd(std::uint64_t task_id, int timeout_ms) {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, std::chrono::milliseconds(timeout_ms), [&] {
      for (const auto& s : statuses_) {
        if (s.task_id == task_id && s.state != DH_TASK_RUNNING) return true;
      }
      return false;
    });
  }
  std::vector<Status> statuses(std::uint64_t task_id) const {
    std::lock_guard lock(mutex_);
    std::vector<Status> out;
    for (const auto& s : statuses_) {
      if (s.task_id == task_id) out.push_back(s);
    }
    return out;
  }

  // ---- block migration ----
  std::string migrate(const std::string& request_json) {
    const auto* table = need(descriptor_->block_migration, "block migration");
    const char* out = nullptr;
    check(table->migrate(instance_, request_json.c_str(), &out), "migrate");
    return out != nullptr ? out : "";
  }
  std::vector<std::string> progress() const {
    std::lock_guard lock(mutex_);
    return progress_;
  }

  // Every line the plugin logged, "LEVEL message".
  std::vector<std::string> logs() const {
    std::lock_guard lock(mutex_);
    return logs_;
  }

 private:
  [[noreturn]] void fail(const std::string& why) {
    if (handle_ != nullptr) ::dlclose(handle_);
    handle_ = nullptr;
    throw std::runtime_error(why);
  }
  template <typename Table>
  const Table* need(const Table* table, const char* kind) const {
    if (table == nullptr) throw std::runtime_error(std::string("the plugin is not a ") + kind);
    return table;
  }
  void check(dh_status status, const char* hook) const {
    if (status == DH_OK) return;
    const char* why = descriptor_->last_error(instance_);
    throw std::runtime_error(std::string(hook) + "() returned status " + std::to_string(status) +
                             (why != nullptr && *why != '\0' ? std::string(": ") + why : ""));
  }
  static PluginUnderTest& of(void* ctx) { return *static_cast<PluginUnderTest*>(ctx); }
  static void onLog(void* ctx, std::int32_t level, const char* message) {
    PluginUnderTest& self = of(ctx);
    std::lock_guard lock(self.mutex_);
    self.logs_.push_back(std::string(logLevelName(level)) + " " +
                         (message != nullptr ? message : ""));
  }
  static void onTaskStatus(void* ctx, std::uint64_t task_id, std::int32_t state,
                           const char* detail_json) {
    PluginUnderTest& self = of(ctx);
    {
      std::lock_guard lock(self.mutex_);
      self.statuses_.push_back({task_id, state, detail_json != nullptr ? detail_json : ""});
    }
    self.changed_.notify_all();
  }
  static void onProgress(void* ctx, const char* progress_json) {
    PluginUnderTest& self = of(ctx);
    std::lock_guard lock(self.mutex_);
    self.progress_.emplace_back(progress_json != nullptr ? progress_json : "");
  }
  static const char* onConfig(void* ctx) { return of(ctx).config_.c_str(); }

  void* handle_ = nullptr;
  const dh_plugin_descriptor* descriptor_ = nullptr;
  dh_plugin* instance_ = nullptr;
  dh_host host_{};
  std::string config_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<Status> statuses_;
  std::vector<std::string> progress_;
  std::vector<std::string> logs_;
};

}  // namespace dockhand::sdk::testing
