// PluginInstance: one instance of a plugin (the dh_plugin* its create() returned), with the
// dh_host table the plugin calls back through.
//
// Every hook call goes through the instance's PluginCalls (plugin_calls.h: one ordered call
// thread, each call bounded by plugin_call_timeout_ms, and what "stuck" means), create() too.
//
// Lifetime: the instance holds a shared_ptr to its PluginLibrary, declared first so that it
// is released last: destroy() runs in the destructor, then the library may be unloaded. The
// callbacks may be invoked from any plugin thread until destroy() returns, so they must stay
// valid (and thread-safe) for the instance's whole life. An instance is only ever held by the
// shared_ptr create() returns, whose deleter first stops its calls: when a call is still in
// the plugin then (a stuck call), the instance is left behind instead of destroyed (neither
// destroy() nor the library's unloading happens under a running call), and leftBehind()
// names it; the agent then ends its process without running destructors.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <spdlog/logger.h>

#include "dockhand/base/result.h"
#include "dockhand/plugin.h"
#include "dockhand/protocol/auth.h"
#include "plugins/plugin_calls.h"
#include "plugins/plugin_library.h"
#include "plugins/plugin_result.h"

namespace dockhand::agent {

// A task's state as a runner reported it (state: DH_TASK_*; detail_json may be empty).
// Called on the plugin's thread.
using TaskStatusCallback =
    std::function<void(std::uint64_t task_id, std::int32_t state, std::string_view detail_json)>;
using MigrationProgressCallback = std::function<void(std::string_view progress_json)>;
// The Authorization header for one block-server request (method, path, content); empty when
// the agent has no cluster secret. Backs dh_host.sign_request.
using RequestSigner = protocol::auth::RequestSigner;

// What the host's dh_host callbacks forward to. Empty functions drop the report (and make
// sign_request answer DH_UNSUPPORTED).
struct PluginCallbacks {
  TaskStatusCallback task_status;
  MigrationProgressCallback migration_progress;
  RequestSigner sign_request;
  // dh_host.unrecoverable: the plugin (named) cannot give back what it holds and asks the
  // agent to end, for `reason`. Any plugin thread. Empty: the request is only logged.
  std::function<void(const std::string& plugin, const std::string& reason)> unrecoverable;
  // dh_host.verify_code: whether the file open as `fd` (named `path`) may load as code; how it
  // was trusted, or why not. Empty: every file may (DH_OK).
  std::function<Result<std::string>(int fd, const std::string& path)> verify_code;
};

class PluginInstance {
 public:
  // Calls the plugin's create() with `config_json` (which must be a JSON object) and a
  // dh_host table forwarding to `callbacks`; the plugin's log lines go to the spdlog logger
  // "plugin.<name>". Before create(), the config is checked against the plugin's
  // config_schema: "<label>: config /path: <problem>" (every problem, joined by "; ").
  // Throws PluginLoadError "<label>: create failed: <plugin's message>" (or the call that
  // never returned). Every call is bounded and timed by `limits` (plugin_calls.h).
  // The check create() makes before calling the plugin: `config` is a JSON object that
  // matches the library's config schema; else "<label>: config /path: <problem>" (every
  // problem, joined by "; "). `dockhand config validate` makes it without creating anything.
  static Result<void> checkConfig(const PluginLibrary& library, const nlohmann::json& config);
  static std::shared_ptr<PluginInstance> create(std::shared_ptr<const PluginLibrary> library,
                                                const std::string& config_json,
                                                PluginCallbacks callbacks,
                                                PluginCallSettings limits = {});

  // Calls the plugin's destroy() (the deleter of create()'s shared_ptr has stopped the calls).
  ~PluginInstance();
  PluginInstance(const PluginInstance&) = delete;
  PluginInstance& operator=(const PluginInstance&) = delete;

  const PluginLibrary& library() const { return *library_; }
  const std::string& name() const { return library_->name(); }
  const dh_plugin_descriptor& descriptor() const { return library_->descriptor(); }
  dh_plugin* handle() const { return handle_; }
  // The instance's calls: every hook call but cancel() goes through them.
  PluginCalls& calls() { return calls_; }

  // The instances not destroyed because a call of theirs was still running ("plugin 'x': its
  // migrate() ..."), for the log and the decision to end the process without destructors.
  static std::vector<std::string> leftBehind();

  // Turns a hook's return into a result: copies out_json on success, or reads last_error()
  // (which must happen on the thread that made the call, right after it).
  PluginResult result(dh_status status, const char* out_json = nullptr) const;

 private:
  PluginInstance(std::shared_ptr<const PluginLibrary> library, std::string config_json,
                 PluginCallbacks callbacks, PluginCallSettings limits);
  // create()'s deleter: stops the calls, then destroys the instance or leaves it behind.
  static void release(PluginInstance* instance);
  std::string lastError(dh_plugin* handle) const;

  static void hostLog(void* ctx, std::int32_t level, const char* message) noexcept;
  static void hostTaskStatus(void* ctx, std::uint64_t task_id, std::int32_t state,
                             const char* detail_json) noexcept;
  static void hostMigrationProgress(void* ctx, const char* progress_json) noexcept;
  static const char* hostConfig(void* ctx) noexcept;
  static std::int32_t hostLogEnabled(void* ctx, std::int32_t level) noexcept;
  static void hostUnrecoverable(void* ctx, const char* reason) noexcept;
  static dh_status hostVerifyCode(void* ctx, int fd, const char* path, char* why,
                                  std::size_t why_size) noexcept;
  static dh_status hostSignRequest(void* ctx, const char* method, const char* path,
                                   const char* content, char* out, std::size_t out_size) noexcept;

  std::shared_ptr<const PluginLibrary> library_;  // first: released last
  std::string config_json_;
  PluginCallbacks callbacks_;
  std::shared_ptr<spdlog::logger> logger_;
  dh_host host_{};
  dh_plugin* handle_ = nullptr;
  PluginCalls calls_;  // last: stopped (by the deleter) before anything above goes
};

}  // namespace dockhand::agent
