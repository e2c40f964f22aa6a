// What programs call for TLS (tls.h), over the TLS module's table (tls_module.h), and the
// loading of that module the first time one of them is called.
#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "dockhand/base/loaded_object.h"
#include "dockhand/tls/tls.h"
#include "tls_module.h"

namespace dockhand::tls {

namespace module {

namespace {

constexpr const char* kModuleName = "libdockhand-tls.so";

struct Loaded {
  const Api* api = nullptr;
  std::string error;  // why no place held a usable module, when api is null
};

// The places to look, in order (see api()).
std::vector<std::string> candidates() {
  std::vector<std::string> out;
  const char* forced = std::getenv("DOCKHAND_TLS_MODULE");
  if (forced != nullptr && *forced != '\0') return {forced};
  out.emplace_back(kModuleName);  // only as the copy already loaded (RTLD_NOLOAD)
  std::vector<std::filesystem::path> dirs;
  if (const auto self = loadedObjectPath(reinterpret_cast<const void*>(&candidates));
      self.has_parent_path()) {
    dirs.push_back(self.parent_path());
  }
  std::error_code ec;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) dirs.push_back(self.parent_path());
  for (const auto& dir : dirs) {
    for (const auto& path :
         {dir / ".." / "lib" / "dockhand" / kModuleName, dir / ".." / kModuleName}) {
      const std::string text = path.lexically_normal().string();
      if (std::find(out.begin(), out.end(), text) == out.end()) out.push_back(text);
    }
  }
  if (std::find(out.begin(), out.end(), DOCKHAND_TLS_MODULE_DEFAULT) == out.end()) {
    out.emplace_back(DOCKHAND_TLS_MODULE_DEFAULT);
  }
  return out;
}

Loaded load() {
  std::string tried;
  auto note = [&tried](const std::string& path, std::string why) {
    // dlerror() starts with the path itself.
    if (why.rfind(path + ": ", 0) == 0) why.erase(0, path.size() + 2);
    tried.append(tried.empty() ? "" : "; ").append(path).append(": ").append(why);
  };
  for (const std::string& path : candidates()) {
    const bool already = path == kModuleName;
    // Never unloaded: contexts and sessions it made live as long as the process.
    void* handle =
        dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE | (already ? RTLD_NOLOAD : 0));
    if (handle == nullptr) {
      if (!already) {
        const char* why = dlerror();
        note(path, why != nullptr ? why : "cannot be loaded");
      }
      continue;
    }
    auto* entry = reinterpret_cast<const void* (*)()>(dlsym(handle, DOCKHAND_TLS_MODULE_ENTRY));
    if (entry == nullptr) {
      note(path, "not a Dockhand TLS module (no " DOCKHAND_TLS_MODULE_ENTRY ")");
      continue;
    }
    const auto* table = static_cast<const Api*>(entry());
    if (table->api_version != kApiVersion || std::strcmp(table->version, DOCKHAND_VERSION) != 0) {
      note(path, fmt::format("built for dockhand {} (module table {}), this program is {} "
                             "(table {}): install the module of this version",
                             table->version, table->api_version, DOCKHAND_VERSION, kApiVersion));
      continue;
    }
    return Loaded{table, {}};
  }
  return Loaded{nullptr, fmt::format("tls: TLS is on, but the TLS module ({}) cannot be loaded: {}",
                                     kModuleName, tried)};
}

}  // namespace

const Api& api() {
  static const Loaded kLoaded = load();
  if (kLoaded.api == nullptr) throw TlsError(kLoaded.error);
  return *kLoaded.api;
}

}  // namespace module

void checkTlsFiles(const TlsConfig& config, Role role) { module::api().check_files(config, role); }

Poco::Net::Context::Ptr makeContext(const TlsConfig& config, Role role) {
  return module::api().make_context(config, role);
}

std::unique_ptr<Poco::Net::HTTPClientSession> newClientSession(
    const std::string& host, std::uint16_t port, const Poco::Net::Context::Ptr& context) {
  if (!context) return std::make_unique<Poco::Net::HTTPClientSession>(host, port);
  return module::api().client_session(host, port, context);
}

Poco::Net::ServerSocket newServerSocket(const Poco::Net::SocketAddress& address, int backlog) {
  return Poco::Net::ServerSocket(address, backlog);
}

NonBlockingStream* nonBlockingStream(const Poco::Net::StreamSocket& socket) {
  return module::api().non_blocking_stream(socket);
}

std::string signEd25519(const std::string& private_key_pem, std::string_view data) {
  return module::api().sign_ed25519(private_key_pem, data);
}

bool verifyEd25519(const std::string& public_key_pem, std::string_view data,
                   std::string_view signature) {
  return module::api().verify_ed25519(public_key_pem, data, signature);
}

}  // namespace dockhand::tls
