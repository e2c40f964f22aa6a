// dockhand/plugin.hpp — a header-only C++ layer over the plugin C ABI (dockhand/plugin.h).
//
// A plugin author writes one class deriving from the base of each kind it implements and
// exports it with one macro:
//
//   class EchoRunner : public dockhand::sdk::TaskRunner {
//    public:
//     EchoRunner(dockhand::sdk::Host host, std::string_view config_json);
//     void launch(std::string_view task_json) override;
//     void kill(std::uint64_t task_id, bool interrupt, std::string_view reason) override;
//   };
//   DOCKHAND_PLUGIN(EchoRunner, "echo", "1.0.0", "Echoes its payload")
//
// The macro defines `dh_plugin_entry` and a static descriptor whose hooks are noexcept
// trampolines: each one catches every exception and turns it into a status code plus the
// message that last_error() returns (kept per thread, as the ABI requires). Throw
// dockhand::sdk::Error to pick the status code (DH_INVALID_ARGUMENT, DH_NOT_FOUND, ...);
// any other exception becomes DH_ERROR with its what().
//
// Lifetime: the instance is constructed in create() and destroyed in destroy(). Start the
// plugin's threads in the constructor and stop them in the destructor; after the destructor
// returns the plugin must not call the Host any more. Do no work in static initializers.
//
// Only the C++17 standard library is used here, so a plugin depends on nothing of the agent.
#ifndef DOCKHAND_PLUGIN_HPP
#define DOCKHAND_PLUGIN_HPP

#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "dockhand/plugin.h"

namespace dockhand::sdk {

// "TRACE", "DEBUG", "INFO", "WARN" or "ERROR" for a DH_LOG_* level ("INFO" for any other).
inline const char* logLevelName(std::int32_t level) noexcept {
  static constexpr const char* kNames[] = {"TRACE", "DEBUG", "INFO", "WARN", "ERROR"};
  return level >= DH_LOG_TRACE && level <= DH_LOG_ERROR ? kNames[level] : "INFO";
}

// An error with a chosen status code. Thrown from a plugin's methods; the trampolines turn
// it into that status and last_error() returns what().
class Error : public std::runtime_error {
 public:
  Error(dh_status status, const std::string& message)
      : std::runtime_error(message), status_(status) {}
  dh_status status() const noexcept { return status_; }

 private:
  dh_status status_;
};

// The host's callbacks (dh_host), safe to copy and to call from any thread. A callback the
// host's table does not contain (an older host) is skipped silently.
class Host {
 public:
  Host() = default;
  explicit Host(const dh_host* host) noexcept : host_(host) {}

  void log(std::int32_t level, const std::string& message) const noexcept {
    if (has(offsetof(dh_host, log)) && host_->log) host_->log(host_->ctx, level, message.c_str());
  }
  // Whether a line at `level` would be written (true on a host older than ABI 1.1).
  bool logEnabled(std::int32_t level) const noexcept {
    if (has(offsetof(dh_host, log_enabled)) && host_->log_enabled) {
      return host_->log_enabled(host_->ctx, level) != 0;
    }
    return host_ != nullptr;
  }
  void trace(const std::string& message) const noexcept { log(DH_LOG_TRACE, message); }
  void debug(const std::string& message) const noexcept { log(DH_LOG_DEBUG, message); }
  void info(const std::string& message) const noexcept { log(DH_LOG_INFO, message); }
  void warn(const std::string& message) const noexcept { log(DH_LOG_WARN, message); }
  void error(const std::string& message) const noexcept { log(DH_LOG_ERROR, message); }

  // state: DH_TASK_*. detail_json: an object as plugin.h describes, or empty for none.
  void taskStatus(std::uint64_t task_id, std::int32_t state,
                  const std::string& detail_json = {}) const noexcept {
    if (has(offsetof(dh_host, task_status)) && host_->task_status) {
      host_->task_status(host_->ctx, task_id, state,
                         detail_json.empty() ? nullptr : detail_json.c_str());
    }
  }

  void migrationProgress(const std::string& progress_json) const noexcept {
    if (has(offsetof(dh_host, migration_progress)) && host_->migration_progress) {
      host_->migration_progress(host_->ctx, progress_json.c_str());
    }
  }

  // The plugin's config object as JSON text ("{}" when the host gives none).
  std::string config() const {
    if (has(offsetof(dh_host, config)) && host_->config) {
      const char* text = host_->config(host_->ctx);
      if (text) return text;
    }
    return "{}";
  }

  // The Authorization header value for one request to another agent's block server
  // (dh_host.sign_request, ABI 1.2): empty when the agent has no cluster secret or is older
  // than 1.2 (send no header then). Sign each request, retries included, right before it.
  std::string signRequest(const std::string& method, const std::string& path,
                          const std::string& content = {}) const {
    if (!has(offsetof(dh_host, sign_request)) || host_->sign_request == nullptr) return {};
    char out[DH_AUTH_HEADER_MAX];
    if (host_->sign_request(host_->ctx, method.c_str(), path.c_str(), content.c_str(), out,
                            sizeof out) != DH_OK) {
      return {};
    }
    return std::string(out);
  }

  // Asks the agent to end because the plugin cannot recover something it holds
  // (dh_host.unrecoverable, ABI 1.3): true when the agent took the request, false when the
  // agent is older than 1.3 (then nothing happens; say so in the plugin's own log).
  bool unrecoverable(const std::string& reason) const {
    if (!has(offsetof(dh_host, unrecoverable)) || host_->unrecoverable == nullptr) return false;
    host_->unrecoverable(host_->ctx, reason.c_str());
    return true;
  }

  // Whether the agent's plugin_trust policy lets the file open as `fd` (named `path`) load as
  // code (dh_host.verify_code, ABI 1.7): "" when it may, else why not and the mend. Load `fd`
  // itself afterwards (dlopen("/proc/self/fd/<fd>")), never `path`. "" on an agent older than
  // 1.7, which has no policy for such files.
  std::string verifyCode(int fd, const std::string& path) const {
    if (!has(offsetof(dh_host, verify_code)) || host_->verify_code == nullptr) return {};
    char why[1024] = {};
    const dh_status status = host_->verify_code(host_->ctx, fd, path.c_str(), why, sizeof why);
    if (status == DH_OK) return {};
    return why[0] != '\0' ? std::string(why)
                          : "refused by the agent's plugin_trust policy (status " +
                                std::to_string(status) + ")";
  }

  const dh_host* raw() const noexcept { return host_; }

 private:
  // True when the host's table (as the host compiled it) reaches the field at `offset`.
  bool has(std::size_t offset) const noexcept {
    return host_ != nullptr && offset + sizeof(void*) <= host_->struct_size;
  }
  const dh_host* host_ = nullptr;
};

// Common base of every plugin class.
class Plugin {
 public:
  virtual ~Plugin() = default;
  Plugin() = default;
  Plugin(const Plugin&) = delete;
  Plugin& operator=(const Plugin&) = delete;
};

// Kind: task runner. The methods run one at a time, on the runner's call thread in the agent
// (tryLaunch: on its core thread, never beside another), and must not block.
class TaskRunner : public virtual Plugin {
 public:
  // Starts a task (task_json as plugin.h describes) and returns; report its states through
  // Host::taskStatus. Throw Error(DH_INVALID_ARGUMENT, ...) for a bad task.
  virtual void launch(std::string_view task_json) = 0;
  // Starts a task as launch() does and returns true, but only when that needs no waiting at
  // all (plugin.h, try_launch): the agent calls it on its core thread. Return false to have
  // launch() called on the call thread instead; throw as launch() would to refuse the task.
  // A class that does not declare it gets no try_launch hook: every task goes to launch().
  virtual bool tryLaunch(std::string_view /*task_json*/) { return false; }
  // Stops a task. Throw Error(DH_NOT_FOUND, ...) when it is unknown or already ended.
  virtual void kill(std::uint64_t task_id, bool interrupt, std::string_view reason) = 0;
  // What the task is doing now, as a JSON object. Unsupported unless overridden.
  virtual std::string threadDump(std::uint64_t /*task_id*/) {
    throw Error(DH_UNSUPPORTED, "thread dumps are not supported by this runner");
  }
  // What the task uses now, {"task_id": N, "cpu_time_ms": N, "rss_bytes": N}. Unsupported
  // unless overridden.
  virtual std::string taskStats(std::uint64_t /*task_id*/) {
    throw Error(DH_UNSUPPORTED, "task stats are not supported by this runner");
  }
  // The agent is replacing its program in place (plugin.h, detach): leave the task running,
  // stop watching it, and return a JSON object that lets adopt() in the new program find it.
  // Report nothing more for it. A class that does not declare it (with adopt) gets neither
  // hook: its tasks are stopped on a restart in place and run again by the driver.
  virtual std::string detach(std::uint64_t /*task_id*/) {
    throw Error(DH_UNSUPPORTED, "this runner's tasks cannot outlive the agent's program");
  }
  // In the new program: take back a task detach() handed over (handle_json as it returned),
  // then report its states as after launch(). Throw to refuse it (it is reported LOST).
  virtual void adopt(std::uint64_t /*task_id*/, std::string_view /*handle_json*/) {
    throw Error(DH_UNSUPPORTED, "this runner cannot take tasks back");
  }
};

// Kind: resource discovery.
class ResourceDiscovery : public virtual Plugin {
 public:
  // The answer for request_json ({"name": "gpu", ...}), or nullopt to decline.
  virtual std::optional<std::string> discover(std::string_view request_json) = 0;
  virtual void allocate(std::string_view /*allocation_json*/) {}
  virtual void release(std::string_view /*allocation_json*/) {}
  virtual std::string describe() { return "{}"; }
};

// Kind: block migration.
class BlockMigration : public virtual Plugin {
 public:
  // Moves the blocks; returns {"migrated": [...], "failed": [...]}. May block.
  virtual std::string migrate(std::string_view request_json) = 0;
  // Asks a running migrate() to return early. Any thread.
  virtual void cancel() {}
};

namespace detail {

// The per-thread message of the last failed call, and the per-thread out_json buffer.
inline std::string& lastErrorSlot() noexcept {
  static thread_local std::string message;
  return message;
}
inline std::string& outSlot() noexcept {
  static thread_local std::string out;
  return out;
}

inline dh_status fail(dh_status status, const char* message) noexcept {
  try {
    lastErrorSlot() = message;
  } catch (...) {
    // Out of memory while copying the message: keep what the slot held.
  }
  return status;
}

// Runs `body` and turns every exception into a status code and a last_error message.
template <class Body>
dh_status guarded(Body&& body) noexcept {
  try {
    return body();
  } catch (const Error& e) {
    return fail(e.status() == DH_OK ? DH_ERROR : e.status(), e.what());
  } catch (const std::exception& e) {
    return fail(DH_ERROR, e.what());
  } catch (...) {
    return fail(DH_ERROR, "unknown exception");
  }
}

// What the host holds as dh_plugin*: the author's object, which is absent when its
// constructor threw (the host then reads last_error and calls destroy on this shell).
template <class T>
struct Instance {
  std::unique_ptr<T> object;
};

template <class T>
T& objectOf(dh_plugin* self) {
  auto* instance = reinterpret_cast<Instance<T>*>(self);
  if (instance == nullptr || !instance->object) {
    throw Error(DH_ERROR, "plugin instance was not created");
  }
  return *instance->object;
}

inline dh_status setOut(std::string value, const char** out_json) {
  if (out_json == nullptr) throw Error(DH_INVALID_ARGUMENT, "out_json is NULL");
  outSlot() = std::move(value);
  *out_json = outSlot().c_str();
  return DH_OK;
}

template <class T, class = void>
struct ConfigSchemaOf {
  // NOLINTNEXTLINE(readability-identifier-naming): a trait's result is `value`, as in std
  static constexpr const char* value = nullptr;
};
template <class T>
struct ConfigSchemaOf<T, std::void_t<decltype(T::kConfigSchema)>> {
  // NOLINTNEXTLINE(readability-identifier-naming): a trait's result is `value`, as in std
  static constexpr const char* value = T::kConfigSchema;
};

template <class T, class = void>
struct RunnerFlagsOf {
  // NOLINTNEXTLINE(readability-identifier-naming): a trait's result is `value`, as in std
  static constexpr std::uint32_t value = 0;
};
template <class T>
struct RunnerFlagsOf<T, std::void_t<decltype(T::kRunnerFlags)>> {
  // NOLINTNEXTLINE(readability-identifier-naming): a trait's result is `value`, as in std
  static constexpr std::uint32_t value = T::kRunnerFlags;
};

template <class T, class = void>
struct DeclaredMinorOf {
  // NOLINTNEXTLINE(readability-identifier-naming): a trait's result is `value`, as in std
  static constexpr std::uint16_t value = 0;
};
template <class T>
struct DeclaredMinorOf<T, std::void_t<decltype(T::kRequiredAbiMinor)>> {
  // NOLINTNEXTLINE(readability-identifier-naming): a trait's result is `value`, as in std
  static constexpr std::uint16_t value = T::kRequiredAbiMinor;
};

// Whether T declares tryLaunch itself (the base's, which says no, gets no hook).
template <class T>
constexpr bool kDeclaresTryLaunch =
    !std::is_same_v<decltype(&T::tryLaunch), bool (TaskRunner::*)(std::string_view)>;

// Whether T declares detach and adopt itself (a runner whose tasks outlive the program).
template <class T>
constexpr bool kDeclaresHandover =
    !std::is_same_v<decltype(&T::detach), std::string (TaskRunner::*)(std::uint64_t)> &&
    !std::is_same_v<decltype(&T::adopt), void (TaskRunner::*)(std::uint64_t, std::string_view)>;

template <class T>
struct Glue {
  static_assert(std::is_base_of_v<Plugin, T>, "a plugin class derives from a dockhand::sdk base");
  static_assert(std::is_constructible_v<T, Host, std::string_view>,
                "a plugin class is constructible from (dockhand::sdk::Host, std::string_view)");

  static constexpr bool kIsRunner = std::is_base_of_v<TaskRunner, T>;
  static constexpr bool kIsDiscovery = std::is_base_of_v<ResourceDiscovery, T>;
  static constexpr bool kIsMigration = std::is_base_of_v<BlockMigration, T>;
  static constexpr std::uint32_t kKinds = (kIsDiscovery ? DH_KIND_RESOURCE_DISCOVERY : 0u) |
                                          (kIsRunner ? DH_KIND_TASK_RUNNER : 0u) |
                                          (kIsMigration ? DH_KIND_BLOCK_MIGRATION : 0u);

  static dh_status create(const dh_host* host, const char* config_json, dh_plugin** out) noexcept {
    if (out == nullptr) return fail(DH_INVALID_ARGUMENT, "create: out is NULL");
    *out = nullptr;
    Instance<T>* shell = nullptr;
    try {
      shell = new Instance<T>();
    } catch (...) {
      return fail(DH_ERROR, "out of memory");
    }
    *out = reinterpret_cast<dh_plugin*>(shell);
    return guarded([&]() -> dh_status {
      shell->object =
          std::make_unique<T>(Host(host), std::string_view(config_json ? config_json : "{}"));
      return DH_OK;
    });
  }

  static void destroy(dh_plugin* self) noexcept {
    // A destructor that throws is already std::terminate in C++; nothing to catch here.
    delete reinterpret_cast<Instance<T>*>(self);
  }

  static const char* lastError(dh_plugin* /*self*/) noexcept { return lastErrorSlot().c_str(); }

  // --- task runner ---
  static dh_status launch(dh_plugin* self, const char* task_json) noexcept {
    return guarded([&] {
      runner(self).launch(task_json ? task_json : "");
      return DH_OK;
    });
  }
  static dh_status tryLaunch(dh_plugin* self, const char* task_json) noexcept {
    return guarded([&] {
      return runner(self).tryLaunch(task_json ? task_json : "") ? DH_OK : DH_UNSUPPORTED;
    });
  }
  static dh_status kill(dh_plugin* self, std::uint64_t task_id, std::int32_t interrupt,
                        const char* reason) noexcept {
    return guarded([&] {
      runner(self).kill(task_id, interrupt != 0, reason ? reason : "");
      return DH_OK;
    });
  }
  static dh_status threadDump(dh_plugin* self, std::uint64_t task_id,
                              const char** out_json) noexcept {
    return guarded([&] { return setOut(runner(self).threadDump(task_id), out_json); });
  }
  static dh_status taskStats(dh_plugin* self, std::uint64_t task_id,
                             const char** out_json) noexcept {
    return guarded([&] { return setOut(runner(self).taskStats(task_id), out_json); });
  }
  static dh_status detach(dh_plugin* self, std::uint64_t task_id, const char** out_json) noexcept {
    return guarded([&] { return setOut(runner(self).detach(task_id), out_json); });
  }
  static dh_status adopt(dh_plugin* self, std::uint64_t task_id, const char* handle_json) noexcept {
    return guarded([&] {
      runner(self).adopt(task_id, handle_json ? handle_json : "");
      return DH_OK;
    });
  }

  // --- resource discovery ---
  static dh_status discover(dh_plugin* self, const char* request_json,
                            const char** out_json) noexcept {
    return guarded([&] {
      std::optional<std::string> answer =
          discovery(self).discover(request_json ? request_json : "");
      if (!answer) return DH_DECLINED;
      return setOut(std::move(*answer), out_json);
    });
  }
  static dh_status allocate(dh_plugin* self, const char* allocation_json) noexcept {
    return guarded([&] {
      discovery(self).allocate(allocation_json ? allocation_json : "");
      return DH_OK;
    });
  }
  static dh_status release(dh_plugin* self, const char* allocation_json) noexcept {
    return guarded([&] {
      discovery(self).release(allocation_json ? allocation_json : "");
      return DH_OK;
    });
  }
  static dh_status describe(dh_plugin* self, const char** out_json) noexcept {
    return guarded([&] { return setOut(discovery(self).describe(), out_json); });
  }

  // --- block migration ---
  static dh_status migrate(dh_plugin* self, const char* request_json,
                           const char** out_json) noexcept {
    return guarded([&] {
      return setOut(migration(self).migrate(request_json ? request_json : ""), out_json);
    });
  }
  static void cancel(dh_plugin* self) noexcept {
    guarded([&] {
      migration(self).cancel();
      return DH_OK;
    });
  }

  static constexpr std::uint32_t runnerFlags() noexcept { return RunnerFlagsOf<T>::value; }

  // The oldest host minor this plugin needs: the newest of the hooks it fills whose absence on
  // an older host would change what it does (flags 1.4, try_launch 1.5, detach/adopt 1.6), or
  // what the class declares (kRequiredAbiMinor), whichever is higher. task_stats (1.1) is
  // filled for every runner but never needed. A plugin that fills none of them loads on 1.0.
  static constexpr std::uint16_t requiredMinor() noexcept {
    std::uint16_t minor = DeclaredMinorOf<T>::value;
    if constexpr (kIsRunner) {
      if (runnerFlags() != 0 && minor < 4) minor = 4;
      if (kDeclaresTryLaunch<T> && minor < 5) minor = 5;
      if (kDeclaresHandover<T> && minor < 6) minor = 6;
    }
    return minor;
  }
  static_assert(requiredMinor() <= DH_ABI_MINOR,
                "kRequiredAbiMinor is newer than the header this plugin is built with");
  static const dh_task_runner_vtable* taskRunnerTable() noexcept {
    if constexpr (kIsRunner) {
      static const dh_task_runner_vtable kTable = {sizeof(dh_task_runner_vtable),
                                                   &launch,
                                                   &kill,
                                                   &threadDump,
                                                   &taskStats,
                                                   runnerFlags(),
                                                   kDeclaresTryLaunch<T> ? &tryLaunch : nullptr,
                                                   kDeclaresHandover<T> ? &detach : nullptr,
                                                   kDeclaresHandover<T> ? &adopt : nullptr};
      return &kTable;
    } else {
      return nullptr;
    }
  }
  static const dh_resource_discovery_vtable* discoveryTable() noexcept {
    if constexpr (kIsDiscovery) {
      static const dh_resource_discovery_vtable kTable = {
          sizeof(dh_resource_discovery_vtable), &discover, &allocate, &release, &describe};
      return &kTable;
    } else {
      return nullptr;
    }
  }
  static const dh_block_migration_vtable* migrationTable() noexcept {
    if constexpr (kIsMigration) {
      static const dh_block_migration_vtable kTable = {sizeof(dh_block_migration_vtable), &migrate,
                                                       &cancel};
      return &kTable;
    } else {
      return nullptr;
    }
  }

  static const dh_plugin_descriptor* descriptor(const char* name, const char* version,
                                                const char* description) noexcept {
    static const dh_plugin_descriptor kDescriptor = {
        sizeof(dh_plugin_descriptor),
        DH_ABI_MAJOR,
        requiredMinor(),
        name,
        version,
        description,
        kKinds,
        ConfigSchemaOf<T>::value,
        &create,
        &destroy,
        &lastError,
        discoveryTable(),
        taskRunnerTable(),
        migrationTable(),
    };
    return &kDescriptor;
  }

 private:
  static TaskRunner& runner(dh_plugin* self) {
    if constexpr (kIsRunner) {
      return objectOf<T>(self);
    } else {
      throw Error(DH_UNSUPPORTED, "not a task runner");
    }
  }
  static ResourceDiscovery& discovery(dh_plugin* self) {
    if constexpr (kIsDiscovery) {
      return objectOf<T>(self);
    } else {
      throw Error(DH_UNSUPPORTED, "not a resource discovery plugin");
    }
  }
  static BlockMigration& migration(dh_plugin* self) {
    if constexpr (kIsMigration) {
      return objectOf<T>(self);
    } else {
      throw Error(DH_UNSUPPORTED, "not a block migration plugin");
    }
  }
};

}  // namespace detail
}  // namespace dockhand::sdk

// Exports `Class` as this library's plugin. Use once per library, at namespace scope.
// Class derives from one or more of dockhand::sdk::TaskRunner, ResourceDiscovery and
// BlockMigration and is constructible from (dockhand::sdk::Host, std::string_view config_json).
// Optionally, `static constexpr const char* kConfigSchema = "...";` in Class fills the
// descriptor's config_schema, and a runner's `static constexpr std::uint32_t kRunnerFlags`
// (DH_RUNNER_* bits) its task_runner table's flags, and `static constexpr std::uint16_t
// kRequiredAbiMinor` raises the host minor it asks for (e.g. 7 for a plugin that cannot work
// without dh_host.verify_code); the descriptor's abi_minor is otherwise derived from the hooks
// the class fills (Glue::requiredMinor).
#define DOCKHAND_PLUGIN(Class, name, version, description)                                     \
  extern "C" DH_EXPORT const dh_plugin_descriptor* dh_plugin_entry(void) {                     \
    return ::dockhand::sdk::detail::Glue<Class>::descriptor((name), (version), (description)); \
  }

#endif  // DOCKHAND_PLUGIN_HPP
