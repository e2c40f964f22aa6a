// PluginLibrary: one plugin shared library, loaded and checked.
//
// open() loads the file with Boost.DLL (RTLD_NOW | RTLD_LOCAL: a missing symbol fails here,
// not at its first call; nothing of the plugin is visible to other plugins), resolves
// `dh_plugin_entry` with exactly the type plugin.h declares, and checks the descriptor before
// anything else of the plugin is called. The library stays loaded for as long as the
// PluginLibrary lives; every PluginInstance holds a shared_ptr to its library, so a library
// is unloaded only after the last instance created from it was destroyed.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>
#include <string_view>

#include <boost/dll/shared_library.hpp>
#include <nlohmann/json.hpp>

#include "dockhand/base/result.h"
#include "dockhand/base/unique_fd.h"
#include "dockhand/plugin.h"
#include "plugins/plugin_error.h"
#include "plugins/plugin_trust.h"

namespace dockhand::agent {

class PluginLibrary {
 public:
  // Throws PluginLoadError: "plugin '<path>': <reason>". Unless `allow_insecure`, a file or
  // directory that group or others may write (or that belongs to neither root nor this
  // user) is refused before it is loaded, as sshd refuses such key files.
  static std::shared_ptr<const PluginLibrary> open(const std::filesystem::path& path,
                                                   bool allow_insecure = false,
                                                   const PluginTrust& trust = {});

  // A plugin whose descriptor is in this process (no file, no dlopen), checked like a loaded
  // one: the seam tests use to give the host a plugin written in the test itself. `origin`
  // stands for the file in messages. Throws PluginLoadError.
  static std::shared_ptr<const PluginLibrary> fromDescriptor(
      const dh_plugin_descriptor* descriptor, const std::filesystem::path& origin = "(in process)");

  PluginLibrary(const PluginLibrary&) = delete;
  PluginLibrary& operator=(const PluginLibrary&) = delete;
  // Unloads the library. When the loader keeps it all the same (a library it cannot unload),
  // the descriptor it is known by stays open: a later file opened on that number would
  // otherwise be taken for it by name.
  ~PluginLibrary();

  const std::filesystem::path& path() const { return path_; }
  const std::string& name() const { return name_; }
  const std::string& version() const { return version_; }
  // The plugin's descriptor, copied up to the plugin's struct_size (the rest zeroed). Its kind
  // tables are copies too, each up to its own struct_size, so a hook that an older minor's
  // table does not reach reads as NULL. Function and string pointers point into the library.
  const dh_plugin_descriptor& descriptor() const { return descriptor_; }
  // The ABI version the plugin was built against.
  std::string abiVersion() const;
  // The plugin's config schema (parsed at open), or null when it publishes none.
  const nlohmann::json& configSchema() const { return config_schema_; }
  bool implements(std::uint32_t kind) const { return (descriptor_.kinds & kind) != 0; }

  // How the trust policy let the file load: "any", "catalog FILE", "signature F by KEY".
  const std::string& trustedBy() const { return trusted_by_; }
  // "plugin 'process' (/usr/lib/dockhand/plugins/dockhand-process.so)", for messages.
  std::string label() const;

 private:
  PluginLibrary() = default;
  // Checks `descriptor` and copies it and its tables; throws PluginLoadError.
  void adopt(const dh_plugin_descriptor* descriptor);

  // The file as opened once (open()); declared before library_ so that it closes after the
  // library is unloaded: the loader knows the library by this descriptor's /proc name.
  UniqueFd fd_;
  std::string trusted_by_;  // how plugin_trust let it load (checkTrust)
  boost::dll::shared_library library_;
  std::filesystem::path path_;
  dh_plugin_descriptor descriptor_{};
  dh_resource_discovery_vtable discovery_table_{};
  dh_task_runner_vtable runner_table_{};
  dh_block_migration_vtable migration_table_{};
  nlohmann::json config_schema_;
  std::string name_;
  std::string version_;
};

// Checks a descriptor against this host's ABI (`host_minor`: the minor the host claims, its own
// unless a test says otherwise): success, or the reason for refusing it. Exposed for tests.
Result<void> checkDescriptor(const dh_plugin_descriptor* descriptor,
                             std::uint16_t host_minor = DH_ABI_MINOR);

// A plugin's name: [a-z0-9_-]{1,64}.
bool isValidPluginName(std::string_view name);

// Whether `trust` lets the file open as `fd` (named `path`) load as code: how it was trusted
// ("any" without reading it), or why not, with the mend. The bytes checked are read from `fd`
// (pread from offset 0), so the caller loads that descriptor, never the path again. A refusal
// is counted in dockhand_plugin_refusals_total. Used for plugins and, through
// dh_host.verify_code, for the job libraries a plugin loads.
Result<std::string> verifyDescriptor(const PluginTrust& trust, int fd,
                                     const std::filesystem::path& path);

// Success when `path` may be loaded as a plugin; otherwise why not (writable by group or
// others, or owned by another user; the same for its directory). Exposed for tests.
Result<void> checkFileSecurity(const std::filesystem::path& path);

}  // namespace dockhand::agent
