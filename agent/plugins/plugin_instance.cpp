#include "plugins/plugin_instance.h"

#include <algorithm>
#include <cstring>
#include <exception>
#include <mutex>

#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "dockhand/base/logging.h"
#include "plugins/config_schema.h"

namespace dockhand::agent {
namespace {

// `text` into the plugin's buffer `out` of `size` bytes (size > 0), cut to fit, NUL-terminated.
void copyCut(const std::string& text, char* out, std::size_t size) {
  const std::size_t n = std::min(text.size(), size - 1);
  std::memcpy(out, text.data(), n);
  out[n] = '\0';
}

// Instances left behind by their deleter: never destroyed, never unloaded (see the header).
struct LeftBehind {
  std::mutex mutex;
  std::vector<PluginInstance*> instances;
  std::vector<std::string> names;
};
LeftBehind& leftBehindInstances() {
  static auto* instance = new LeftBehind();  // never destroyed: outlives every exit path
  return *instance;
}

spdlog::level::level_enum levelOf(std::int32_t level) {
  switch (level) {
    case DH_LOG_TRACE:
      return spdlog::level::trace;
    case DH_LOG_DEBUG:
      return spdlog::level::debug;
    case DH_LOG_INFO:
      return spdlog::level::info;
    case DH_LOG_WARN:
      return spdlog::level::warn;
    default:
      return spdlog::level::err;
  }
}

}  // namespace

Result<void> PluginInstance::checkConfig(const PluginLibrary& library,
                                         const nlohmann::json& config) {
  const std::string label = library.label();
  if (!config.is_object()) return Error(label + ": config must be a JSON object");
  const auto& schema = library.configSchema();
  if (schema.is_null()) return {};
  std::string text;
  for (const auto& p : checkAgainstSchema(config, schema)) {
    text += (text.empty() ? "" : "; ") + std::string("config ") + (p.path.empty() ? "/" : p.path) +
            ": " + p.message;
  }
  if (!text.empty()) return Error(label + ": " + text);
  return {};
}

std::shared_ptr<PluginInstance> PluginInstance::create(std::shared_ptr<const PluginLibrary> library,
                                                       const std::string& config_json,
                                                       PluginCallbacks callbacks,
                                                       PluginCallSettings limits) {
  const auto parsed = nlohmann::json::parse(config_json, nullptr, /*allow_exceptions=*/false);
  if (auto checked = checkConfig(*library, parsed); !checked) {
    throw PluginLoadError(checked.error().message);
  }
  std::shared_ptr<PluginInstance> instance(
      new PluginInstance(std::move(library), config_json, std::move(callbacks), std::move(limits)),
      &PluginInstance::release);
  PluginInstance& self = *instance;
  const PluginResult created = self.calls_.call({"create"}, [&self] {
    dh_plugin* handle = nullptr;
    const dh_status status =
        self.descriptor().create(&self.host_, self.config_json_.c_str(), &handle);
    if (status == DH_OK && handle != nullptr) {
      self.handle_ = handle;
      return PluginResult{};
    }
    PluginResult failed{status == DH_OK ? DH_ERROR : status, {}, {}};
    PluginCalls::noteError();
    if (status == DH_OK) {
      failed.error = "it returned no instance";
    } else {
      failed.error =
          handle ? self.lastError(handle) : "status " + std::to_string(status) + " and no message";
      if (handle) self.descriptor().destroy(handle);
    }
    return failed;
  });
  // A create() that never returned is named in the error; the instance is then left behind.
  if (!created.ok()) {
    throw PluginLoadError(instance->library().label() + ": create failed: " + created.error);
  }
  instance->logger_->debug("created ({} {})", instance->name(), instance->library().version());
  return instance;
}

void PluginInstance::release(PluginInstance* instance) {
  PluginCalls& calls = instance->calls_;
  // Calls still queued may run; a stuck instance is not waited for again.
  const auto deadline = std::chrono::steady_clock::now() +
                        (calls.stuck() ? std::chrono::milliseconds(0) : calls.timeout());
  if (calls.stop(deadline)) {
    delete instance;
    return;
  }
  std::string what = instance->library().label() + ": " +
                     (calls.stuck() ? calls.stuckCall() : std::string("a call did not return"));
  instance->logger_->error("{}; the plugin is left behind, not destroyed", what);
  auto& left = leftBehindInstances();
  std::lock_guard lock(left.mutex);
  left.instances.push_back(instance);
  left.names.push_back(std::move(what));
}

std::vector<std::string> PluginInstance::leftBehind() {
  auto& left = leftBehindInstances();
  std::lock_guard lock(left.mutex);
  return left.names;
}

PluginInstance::PluginInstance(std::shared_ptr<const PluginLibrary> library,
                               std::string config_json, PluginCallbacks callbacks,
                               PluginCallSettings limits)
    : library_(std::move(library)),
      config_json_(std::move(config_json)),
      callbacks_(std::move(callbacks)),
      logger_(logger("plugin." + library_->name())),
      calls_("plugin '" + library_->name() + "'", std::move(limits), library_->name()) {
  host_.struct_size = sizeof(dh_host);
  host_.ctx = this;
  host_.log = &hostLog;
  host_.task_status = &hostTaskStatus;
  host_.migration_progress = &hostMigrationProgress;
  host_.config = &hostConfig;
  host_.log_enabled = &hostLogEnabled;
  host_.sign_request = &hostSignRequest;
  host_.unrecoverable = &hostUnrecoverable;
  host_.verify_code = &hostVerifyCode;
}

dh_status PluginInstance::hostVerifyCode(void* ctx, int fd, const char* path, char* why,
                                         std::size_t why_size) noexcept {
  auto* self = static_cast<PluginInstance*>(ctx);
  if (path == nullptr || why == nullptr || why_size == 0 || fd < 0) return DH_INVALID_ARGUMENT;
  why[0] = '\0';
  if (!self->callbacks_.verify_code) return DH_OK;
  try {
    auto trusted = self->callbacks_.verify_code(fd, path);
    if (trusted) {
      self->logger_->debug("{} may load: trusted by {}", path, *trusted);
      return DH_OK;
    }
    copyCut(trusted.error().message, why, why_size);
  } catch (const std::exception& e) {
    copyCut(std::string("the trust check failed: ") + e.what(), why, why_size);
  }
  return DH_ERROR;
}

void PluginInstance::hostUnrecoverable(void* ctx, const char* reason) noexcept {
  auto* self = static_cast<PluginInstance*>(ctx);
  const std::string why = reason == nullptr || *reason == '\0' ? "(no reason given)" : reason;
  try {
    if (!self->callbacks_.unrecoverable) {
      self->logger_->error("cannot recover: {} (nothing here ends the process)", why);
      return;
    }
    self->callbacks_.unrecoverable(self->library_->name(), why);
  } catch (const std::exception& e) {
    self->logger_->error("cannot recover: {} (and passing that on failed: {})", why, e.what());
  }
}

dh_status PluginInstance::hostSignRequest(void* ctx, const char* method, const char* path,
                                          const char* content, char* out,
                                          std::size_t out_size) noexcept {
  auto* self = static_cast<PluginInstance*>(ctx);
  if (method == nullptr || path == nullptr || out == nullptr || out_size == 0) {
    return DH_INVALID_ARGUMENT;
  }
  if (!self->callbacks_.sign_request) return DH_UNSUPPORTED;
  try {
    std::string header =
        self->callbacks_.sign_request(method, path, content == nullptr ? "" : content);
    if (header.empty()) return DH_UNSUPPORTED;
    if (header.size() + 1 > out_size) return DH_INVALID_ARGUMENT;
    std::memcpy(out, header.c_str(), header.size() + 1);
    return DH_OK;
  } catch (const std::exception& e) {
    self->logger_->warn("sign_request failed: {}", e.what());
    return DH_ERROR;
  }
}

PluginInstance::~PluginInstance() {
  if (handle_ != nullptr) descriptor().destroy(handle_);
}

std::string PluginInstance::lastError(dh_plugin* handle) const {
  const char* message = descriptor().last_error(handle);
  if (message == nullptr || *message == '\0') return "(the plugin gave no message)";
  return message;
}

PluginResult PluginInstance::result(dh_status status, const char* out_json) const {
  PluginResult r;
  r.status = status;
  if (status == DH_OK) {
    if (out_json != nullptr) r.json = out_json;
  } else {
    PluginCalls::noteError();
    r.error = lastError(handle_);
  }
  return r;
}

void PluginInstance::hostLog(void* ctx, std::int32_t level, const char* message) noexcept {
  try {
    auto* self = static_cast<PluginInstance*>(ctx);
    self->logger_->log(levelOf(level), "{}", message ? message : "");
  } catch (...) {
    // A log line is not worth an exception across the ABI.
  }
}

void PluginInstance::hostTaskStatus(void* ctx, std::uint64_t task_id, std::int32_t state,
                                    const char* detail_json) noexcept {
  auto* self = static_cast<PluginInstance*>(ctx);
  try {
    if (self->callbacks_.task_status) {
      self->callbacks_.task_status(
          task_id, state, detail_json ? std::string_view(detail_json) : std::string_view());
    }
  } catch (const std::exception& e) {
    try {
      self->logger_->error("task {}: status report dropped: {}", task_id, e.what());
    } catch (...) {
    }
  } catch (...) {
  }
}

void PluginInstance::hostMigrationProgress(void* ctx, const char* progress_json) noexcept {
  auto* self = static_cast<PluginInstance*>(ctx);
  try {
    if (self->callbacks_.migration_progress && progress_json) {
      self->callbacks_.migration_progress(progress_json);
    }
  } catch (...) {
  }
}

std::int32_t PluginInstance::hostLogEnabled(void* ctx, std::int32_t level) noexcept {
  return static_cast<PluginInstance*>(ctx)->logger_->should_log(levelOf(level)) ? 1 : 0;
}

const char* PluginInstance::hostConfig(void* ctx) noexcept {
  return static_cast<PluginInstance*>(ctx)->config_json_.c_str();
}

}  // namespace dockhand::agent
