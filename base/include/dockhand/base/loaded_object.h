// The file a loaded object (a program or shared library of this process) came from, found from
// an address inside it: what a plugin looks beside itself with (its worker program, the TLS
// module). The agent loads a plugin through its descriptor's /proc/self/fd/N name
// (PluginLibrary::open), so that name is resolved to the file's own path here. Header-only.
#pragma once

#include <dlfcn.h>

#include <filesystem>
#include <string_view>

namespace dockhand {

// The path of the object holding `address`; empty when the loader cannot tell.
inline std::filesystem::path loadedObjectPath(const void* address) {
  Dl_info info{};
  if (::dladdr(address, &info) == 0 || info.dli_fname == nullptr) return {};
  std::filesystem::path name = info.dli_fname;
  if (std::string_view(info.dli_fname).rfind("/proc/self/fd/", 0) == 0) {
    std::error_code ec;
    auto target = std::filesystem::read_symlink(name, ec);
    if (!ec) return target;
  }
  return name;
}

}  // namespace dockhand
