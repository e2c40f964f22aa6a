#include "plugins/plugin_library.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <type_traits>

#include <boost/dll/shared_library_load_mode.hpp>

#include "dockhand/base/code_file.h"
#include "dockhand/metrics/metrics.h"

namespace dockhand::agent {
namespace {

// The entry point's type, taken from the C header so that it cannot drift from it.
using EntryFunction = decltype(dh_plugin_entry);
static_assert(std::is_same_v<EntryFunction*, dh_plugin_entry_fn>,
              "dh_plugin_entry and dh_plugin_entry_fn disagree");

// The size of each ABI struct at minor 0: what every plugin of this major provides at least.
// (Fields appended since 1.0 are optional and read only when a table's struct_size has them.)
constexpr std::uint32_t kMinDescriptorSize = sizeof(dh_plugin_descriptor);
constexpr std::uint32_t kMinRunnerSize = offsetof(dh_task_runner_vtable, task_stats);
constexpr std::uint32_t kMinDiscoverySize = sizeof(dh_resource_discovery_vtable);
constexpr std::uint32_t kMinMigrationSize = sizeof(dh_block_migration_vtable);

// Copies a plugin's table up to its struct_size (at most ours); the rest stays zero (NULL).
template <class Table>
const Table* copyTable(const Table* source, Table& target) {
  if (source == nullptr) return nullptr;
  target = Table{};
  std::memcpy(&target, source, std::min<std::size_t>(source->struct_size, sizeof(Table)));
  return &target;
}

constexpr std::uint32_t kAllKinds =
    DH_KIND_RESOURCE_DISCOVERY | DH_KIND_TASK_RUNNER | DH_KIND_BLOCK_MIGRATION;

// Checks that the table of a kind is present exactly when the kind is declared.
template <class Table, class Hook>
std::string checkTable(const dh_plugin_descriptor& d, std::uint32_t kind, const Table* table,
                       std::uint32_t min_size, Hook Table::*required, const char* kind_name,
                       const char* hook_name) {
  const bool declared = (d.kinds & kind) != 0;
  if (!declared) {
    if (table != nullptr) {
      return std::string("has a ") + kind_name + " table but does not declare that kind";
    }
    return {};
  }
  if (table == nullptr) {
    return std::string("declares kind ") + kind_name + " but has no " + kind_name + " table";
  }
  if (table->struct_size < min_size) {
    return std::string(kind_name) + " table struct_size " + std::to_string(table->struct_size) +
           " is smaller than ABI " + std::to_string(DH_ABI_MAJOR) + ".0's " +
           std::to_string(min_size);
  }
  if (table->*required == nullptr) {
    return std::string("the required ") + kind_name + " hook " + hook_name + " is missing";
  }
  return {};
}

bool looksLikeElf(int fd) {
  char magic[4] = {};
  return ::pread(fd, magic, sizeof magic, 0) == 4 && std::memcmp(magic,
                                                                 "\x7f"
                                                                 "ELF",
                                                                 4) == 0;
}

// The whole file behind `fd`, read once: the bytes the trust policy checks are the bytes
// loaded.
Result<std::string> readAll(int fd) {
  std::string bytes;
  char buffer[1 << 16];
  for (off_t at = 0;;) {
    const ssize_t n = ::pread(fd, buffer, sizeof buffer, at);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Error(std::string("cannot be read: ") + std::strerror(errno));
    if (n == 0) return bytes;
    bytes.append(buffer, static_cast<std::size_t>(n));
    at += n;
  }
}

}  // namespace

bool isValidPluginName(std::string_view name) {
  if (name.empty() || name.size() > 64) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
  });
}

Result<std::string> verifyDescriptor(const PluginTrust& trust, int fd,
                                     const std::filesystem::path& path) {
  if (trust.policy == PluginTrust::Policy::kAny) return std::string("any");
  auto bytes = readAll(fd);
  if (!bytes) return bytes.error();
  auto trusted = checkTrust(trust, path, *bytes);
  if (!trusted && trust.metrics) {
    trust.metrics
        ->counter("dockhand_plugin_refusals_total",
                  "Plugin files (and job libraries) the plugin_trust policy refused to load "
                  "(docs/plugins.md, \"Trust\").",
                  {"policy"})
        .labels({std::string(toString(trust.policy))})
        .inc();
  }
  return trusted;
}

namespace {

// The reason to refuse a descriptor, or "" (checkDescriptor's body).
std::string descriptorProblem(const dh_plugin_descriptor* raw, std::uint16_t host_minor) {
  if (raw == nullptr) return "dh_plugin_entry returned no descriptor";
  if (raw->struct_size < offsetof(dh_plugin_descriptor, name)) {
    return "descriptor struct_size " + std::to_string(raw->struct_size) + " is too small";
  }
  if (raw->abi_major != DH_ABI_MAJOR) {
    return "ABI major " + std::to_string(raw->abi_major) + ", host supports " +
           std::to_string(DH_ABI_MAJOR);
  }
  if (raw->abi_minor > host_minor) {
    return "needs ABI " + std::to_string(raw->abi_major) + "." + std::to_string(raw->abi_minor) +
           ", host supports up to " + std::to_string(DH_ABI_MAJOR) + "." +
           std::to_string(host_minor) +
           " (upgrade the agent, or use a plugin build that needs less)";
  }
  if (raw->struct_size < kMinDescriptorSize) {
    return "descriptor struct_size " + std::to_string(raw->struct_size) + " is smaller than ABI " +
           std::to_string(DH_ABI_MAJOR) + ".0's " + std::to_string(kMinDescriptorSize);
  }
  const dh_plugin_descriptor& d = *raw;
  if (d.name == nullptr || !isValidPluginName(d.name))
    return "name is missing or not [a-z0-9_-]{1,64}";
  if (d.version == nullptr || *d.version == '\0') return "version is missing";
  if (d.create == nullptr) return "the required hook create is missing";
  if (d.destroy == nullptr) return "the required hook destroy is missing";
  if (d.last_error == nullptr) return "the required hook last_error is missing";
  if (d.kinds == 0) return "declares no kind";
  if ((d.kinds & ~kAllKinds) != 0) return "declares unknown kinds " + std::to_string(d.kinds);
  if (auto why =
          checkTable(d, DH_KIND_RESOURCE_DISCOVERY, d.resource_discovery, kMinDiscoverySize,
                     &dh_resource_discovery_vtable::discover, "resource_discovery", "discover");
      !why.empty()) {
    return why;
  }
  if (auto why = checkTable(d, DH_KIND_TASK_RUNNER, d.task_runner, kMinRunnerSize,
                            &dh_task_runner_vtable::launch, "task_runner", "launch");
      !why.empty()) {
    return why;
  }
  if (d.task_runner != nullptr && (d.kinds & DH_KIND_TASK_RUNNER) &&
      d.task_runner->kill == nullptr) {
    return "the required task_runner hook kill is missing";
  }
  if (auto why = checkTable(d, DH_KIND_BLOCK_MIGRATION, d.block_migration, kMinMigrationSize,
                            &dh_block_migration_vtable::migrate, "block_migration", "migrate");
      !why.empty()) {
    return why;
  }
  return {};
}

}  // namespace

Result<void> checkDescriptor(const dh_plugin_descriptor* descriptor, std::uint16_t host_minor) {
  if (std::string why = descriptorProblem(descriptor, host_minor); !why.empty()) {
    return Error(std::move(why));
  }
  return {};
}

Result<void> checkFileSecurity(const std::filesystem::path& path) {
  return checkCodeFileSecurity(path, "allow_insecure_plugins");
}

std::shared_ptr<const PluginLibrary> PluginLibrary::open(const std::filesystem::path& path,
                                                         bool allow_insecure,
                                                         const PluginTrust& trust) {
  auto fail = [&](const std::string& why) -> PluginLoadError {
    return PluginLoadError("plugin '" + path.string() + "': " + why);
  };
  std::error_code fs_error;
  if (!std::filesystem::is_regular_file(path, fs_error)) {
    throw fail(std::filesystem::exists(path, fs_error) ? "not a regular file" : "no such file");
  }
  std::shared_ptr<PluginLibrary> library(new PluginLibrary());
  library->path_ = path;
  // Opened once: the checks below and the loader see this one file, whatever the path names
  // by the time the loader runs.
  library->fd_.reset(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  const int fd = library->fd_.get();
  if (fd < 0) throw fail(std::string("cannot open: ") + std::strerror(errno));
  if (!allow_insecure) {
    if (auto secure = checkFileSecurity(path); !secure) {
      throw fail("refused: " + secure.error().message);
    }
    if (auto same = checkSameFile(fd, path); !same) throw fail("refused: " + same.error().message);
  }
  if (!looksLikeElf(fd)) throw fail("not a shared library (no ELF header)");
  auto trusted = verifyDescriptor(trust, fd, path);
  if (!trusted) throw fail(trusted.error().message);
  library->trusted_by_ = std::move(*trusted);
  // The loader maps the descriptor checked above, by its /proc name (unique while it is open).
  const std::string loaded_name = "/proc/self/fd/" + std::to_string(fd);
  boost::dll::fs::error_code ec;
  library->library_.load(boost::dll::fs::path(loaded_name),
                         boost::dll::load_mode::rtld_now | boost::dll::load_mode::rtld_local, ec);
  if (ec || !library->library_.is_loaded()) {
    // Boost.DLL drops dlerror()'s text; ask the loader once more for it.
    std::string reason = ec ? ec.message() : "unknown error";
    if (void* handle = ::dlopen(loaded_name.c_str(), RTLD_NOW | RTLD_LOCAL)) {
      ::dlclose(handle);
    } else if (const char* text = ::dlerror()) {
      reason = text;
      if (reason.rfind(loaded_name + ": ", 0) == 0) reason.erase(0, loaded_name.size() + 2);
    }
    throw fail("cannot load: " + reason);
  }
  if (!library->library_.has(DH_PLUGIN_ENTRY_SYMBOL)) {
    throw fail("missing entry symbol " DH_PLUGIN_ENTRY_SYMBOL " (not a Dockhand plugin?)");
  }
  EntryFunction& entry = library->library_.get<EntryFunction>(DH_PLUGIN_ENTRY_SYMBOL);
  library->adopt(entry());
  return library;
}

PluginLibrary::~PluginLibrary() {
  if (fd_.get() < 0 || !library_.is_loaded()) return;
  const std::string loaded_name = "/proc/self/fd/" + std::to_string(fd_.get());
  library_.unload();
  if (void* still = ::dlopen(loaded_name.c_str(), RTLD_NOW | RTLD_NOLOAD)) {
    ::dlclose(still);
    fd_.release();  // still loaded under this descriptor's /proc name: it stays open with it
  }
}

std::shared_ptr<const PluginLibrary> PluginLibrary::fromDescriptor(
    const dh_plugin_descriptor* descriptor, const std::filesystem::path& origin) {
  std::shared_ptr<PluginLibrary> library(new PluginLibrary());
  library->path_ = origin;
  library->adopt(descriptor);
  return library;
}

void PluginLibrary::adopt(const dh_plugin_descriptor* raw) {
  if (auto checked = checkDescriptor(raw); !checked) {
    throw PluginLoadError("plugin '" + path_.string() + "': " + checked.error().message);
  }
  std::memcpy(&descriptor_, raw,
              std::min<std::size_t>(raw->struct_size, sizeof(dh_plugin_descriptor)));
  dh_plugin_descriptor& d = descriptor_;
  d.resource_discovery = copyTable(d.resource_discovery, discovery_table_);
  d.task_runner = copyTable(d.task_runner, runner_table_);
  d.block_migration = copyTable(d.block_migration, migration_table_);
  name_ = raw->name;
  version_ = raw->version;
  if (d.config_schema != nullptr) {
    config_schema_ = nlohmann::json::parse(d.config_schema, nullptr, false);
    if (config_schema_.is_discarded() || !config_schema_.is_object()) {
      throw PluginLoadError(label() + ": config_schema is not a JSON object");
    }
  }
}

std::string PluginLibrary::abiVersion() const {
  return std::to_string(descriptor_.abi_major) + "." + std::to_string(descriptor_.abi_minor);
}

std::string PluginLibrary::label() const {
  return "plugin '" + name_ + "' (" + path_.string() + ")";
}

}  // namespace dockhand::agent
