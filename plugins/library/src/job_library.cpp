#include "job_library.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <set>

#include "dockhand/base/code_file.h"

namespace dockhand::plugins::library {
namespace {

bool validLibraryName(const char* name) {
  if (name == nullptr || *name == '\0' || std::strlen(name) > 64) return false;
  for (const char* p = name; *p != '\0'; ++p) {
    const char c = *p;
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-')) return false;
  }
  return true;
}

bool validFunctionName(const char* name) {
  if (name == nullptr || *name == '\0' || std::strlen(name) > 128) return false;
  for (const char* p = name; *p != '\0'; ++p) {
    const char c = *p;
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '.' || c == '-';
    if (!ok) return false;
  }
  return true;
}

// The size of a 1.0 descriptor: a library must fill at least that much.
constexpr std::size_t kMinDescriptorSize =
    offsetof(dh_job_descriptor, function_count) + sizeof(std::uint32_t);

}  // namespace

void JobLibrary::checkFile(const std::string& path, bool allow_insecure) {
  auto refuse = [&](const std::string& why) {
    return LibraryRefused("job library '" + path + "': " + why);
  };
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) throw refuse("no such file");
  if (!S_ISREG(st.st_mode)) throw refuse("not a regular file");
  if (!allow_insecure) {
    if (auto secure = checkCodeFileSecurity(path, "allow_insecure_libraries"); !secure) {
      throw refuse("refused: " + secure.error().message);
    }
  }
}

std::shared_ptr<JobLibrary> JobLibrary::open(const std::string& path, bool allow_insecure,
                                             const CodeVerifier& verify) {
  return load(openFile(path, allow_insecure, verify), path);
}

int JobLibrary::openFile(const std::string& path, bool allow_insecure, const CodeVerifier& verify) {
  auto refuse = [&](const std::string& why) {
    return LibraryRefused("job library '" + path + "': " + why);
  };
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) throw refuse("no such file");
    throw refuse(std::string("cannot open it: ") + std::strerror(errno));
  }
  try {
    checkFile(path, allow_insecure);
    if (auto same = checkSameFile(fd, path); !same)
      throw refuse("refused: " + same.error().message);
    if (verify) {
      if (std::string why = verify(fd, path); !why.empty()) throw refuse(why);
    }
  } catch (...) {
    ::close(fd);
    throw;
  }
  return fd;
}

std::shared_ptr<JobLibrary> JobLibrary::load(int fd, const std::string& path) {
  auto refuse = [&](const std::string& why) {
    return LibraryRefused("job library '" + path + "': " + why);
  };
  std::shared_ptr<JobLibrary> library(new JobLibrary());
  library->fd_ = fd;  // closed by the destructor, also on a refusal below
  library->path_ = path;
  // The loader maps the checked descriptor by its /proc name, unique while it is open.
  const std::string loaded_name = "/proc/self/fd/" + std::to_string(fd);
  ::dlerror();
  library->handle_ = ::dlopen(loaded_name.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (library->handle_ == nullptr) {
    const char* error = ::dlerror();
    std::string reason = error != nullptr ? error : "dlopen failed";
    if (reason.rfind(loaded_name + ": ", 0) == 0) reason.erase(0, loaded_name.size() + 2);
    throw refuse("cannot load it: " + reason);
  }
  void* symbol = ::dlsym(library->handle_, DH_JOB_ENTRY_SYMBOL);
  if (symbol == nullptr) {
    throw refuse("no " DH_JOB_ENTRY_SYMBOL " symbol: not a job library (see dockhand/job.h)");
  }
  auto entry = reinterpret_cast<dh_job_entry_fn>(symbol);
  const dh_job_descriptor* descriptor = entry();
  if (descriptor == nullptr) throw refuse(DH_JOB_ENTRY_SYMBOL " returned NULL");
  if (descriptor->struct_size < kMinDescriptorSize) {
    throw refuse("descriptor struct_size " + std::to_string(descriptor->struct_size) +
                 " is smaller than a 1.0 descriptor");
  }
  const std::string abi =
      std::to_string(descriptor->abi_major) + "." + std::to_string(descriptor->abi_minor);
  const std::string ours =
      std::to_string(DH_JOB_ABI_MAJOR) + "." + std::to_string(DH_JOB_ABI_MINOR);
  if (descriptor->abi_major != DH_JOB_ABI_MAJOR) {
    throw refuse("built against job ABI " + abi + ", this runner speaks " + ours +
                 " (the major version must be equal); rebuild it against this SDK");
  }
  if (descriptor->abi_minor > DH_JOB_ABI_MINOR) {
    throw refuse("built against job ABI " + abi + ", newer than this runner's " + ours +
                 "; upgrade the agent or rebuild the library");
  }
  if (!validLibraryName(descriptor->name))
    throw refuse("descriptor name is missing or not [a-z0-9_-]+");
  if (descriptor->version == nullptr || *descriptor->version == '\0') {
    throw refuse("descriptor version is missing");
  }
  if (descriptor->functions == nullptr || descriptor->function_count == 0) {
    throw refuse("descriptor has no task functions");
  }
  std::set<std::string> seen;
  for (std::uint32_t i = 0; i < descriptor->function_count; ++i) {
    const dh_job_function& function = descriptor->functions[i];
    const std::string where = "function " + std::to_string(i);
    if (!validFunctionName(function.name))
      throw refuse(where + ": name missing or not [A-Za-z0-9_.-]+");
    if (function.run == nullptr) throw refuse(where + " ('" + function.name + "'): run is NULL");
    if (!seen.insert(function.name).second) {
      throw refuse("function name '" + std::string(function.name) + "' appears twice");
    }
    library->functions_.emplace_back(function.name, function.run);
  }
  library->abi_ = abi;
  library->name_ = descriptor->name;
  library->version_ = descriptor->version;
  return library;
}

LibraryFile::~LibraryFile() {
  if (fd_ >= 0) ::close(fd_);
}

JobLibrary::~JobLibrary() {
  if (handle_ != nullptr) {
    ::dlclose(handle_);
    // A library the loader cannot unload (GNU unique symbols, as C++ inline statics make)
    // stays mapped under its /proc/self/fd/N name: its descriptor stays open, so that N is
    // never reused for another file, which dlopen would then take for this library.
    const std::string loaded_name = "/proc/self/fd/" + std::to_string(fd_);
    if (void* still = ::dlopen(loaded_name.c_str(), RTLD_NOW | RTLD_NOLOAD)) {
      ::dlclose(still);
      return;
    }
  }
  if (fd_ >= 0) ::close(fd_);
}

dh_task_fn JobLibrary::find(const std::string& function) const {
  for (const auto& [name, run] : functions_) {
    if (name == function) return run;
  }
  return nullptr;
}

std::string JobLibrary::functionNames() const {
  std::string out;
  for (const auto& [name, run] : functions_) {
    if (!out.empty()) out += ", ";
    out += name;
  }
  return out;
}

}  // namespace dockhand::plugins::library
