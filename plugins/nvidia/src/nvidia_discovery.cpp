// The `nvidia` discovery plugin: NVIDIA GPUs, addressed by their index as Spark's GPU script
// reports them.
//
// It loads NVML (libnvidia-ml.so.1, shipped with the driver) at run time when it is there, so
// the build needs neither CUDA nor the driver; without NVML it runs
//   nvidia-smi --query-gpu=index,name,uuid,memory.total --format=csv,noheader,nounits
// bounded by a timeout. It answers only for "gpu" and declines, with a log line, when no
// NVIDIA driver is there (no NVML and no nvidia-smi, or neither can reach a driver).
// describe() gives each GPU's index, name, UUID and memory.
//
// Config (all optional):
//   {"nvml_library": "libnvidia-ml.so.1", "nvidia_smi": "nvidia-smi", "timeout_ms": 10000,
//    "resource": "gpu"}
// "nvml_library": "" skips NVML; "nvidia_smi": "" skips the fallback.
#include <dlfcn.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bounded_run.h"
#include "dockhand/plugin.hpp"

namespace {

using dockhand::plugins::BoundedRun;
using dockhand::sdk::Error;
using nlohmann::json;

// The few NVML declarations used here (nvml.h, stable since driver 325 for the _v2 entries).
using nvmlReturn_t = int;                    // NOLINT(readability-identifier-naming): NVML's names
using nvmlDevice_t = struct nvmlDevice_st*;  // NOLINT(readability-identifier-naming): NVML's
struct nvmlMemory_t {                        // NOLINT(readability-identifier-naming): NVML's name
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};
constexpr nvmlReturn_t kNvmlSuccess = 0;
constexpr unsigned kNvmlNameLength = 96;  // NVML_DEVICE_NAME_V2_BUFFER_SIZE
constexpr unsigned kNvmlUuidLength = 96;  // NVML_DEVICE_UUID_V2_BUFFER_SIZE

struct Gpu {
  std::string index;
  std::string name;
  std::string uuid;
  json memory_total_mib;  // a number, or null when unknown
};

struct Probe {
  bool driver = false;  // false: no NVIDIA driver found this way
  std::string why;      // why not, for the log
  std::vector<Gpu> gpus;
};

// dlclose on scope exit.
class Library {
 public:
  explicit Library(const std::string& name) : handle_(::dlopen(name.c_str(), RTLD_NOW)) {}
  ~Library() {
    if (handle_) ::dlclose(handle_);
  }
  Library(const Library&) = delete;
  Library& operator=(const Library&) = delete;
  explicit operator bool() const { return handle_ != nullptr; }
  template <class Fn>
  Fn symbol(const char* name) const {
    return reinterpret_cast<Fn>(::dlsym(handle_, name));
  }

 private:
  void* handle_;
};

Probe probeNvml(const std::string& library_name) {
  Probe probe;
  Library nvml(library_name);
  if (!nvml) {
    const char* why = ::dlerror();
    probe.why = "cannot load " + library_name + (why ? std::string(": ") + why : std::string());
    return probe;
  }
  auto init = nvml.symbol<nvmlReturn_t (*)()>("nvmlInit_v2");
  auto shutdown = nvml.symbol<nvmlReturn_t (*)()>("nvmlShutdown");
  auto count = nvml.symbol<nvmlReturn_t (*)(unsigned*)>("nvmlDeviceGetCount_v2");
  auto by_index =
      nvml.symbol<nvmlReturn_t (*)(unsigned, nvmlDevice_t*)>("nvmlDeviceGetHandleByIndex_v2");
  auto get_name = nvml.symbol<nvmlReturn_t (*)(nvmlDevice_t, char*, unsigned)>("nvmlDeviceGetName");
  auto get_uuid = nvml.symbol<nvmlReturn_t (*)(nvmlDevice_t, char*, unsigned)>("nvmlDeviceGetUUID");
  auto get_memory =
      nvml.symbol<nvmlReturn_t (*)(nvmlDevice_t, nvmlMemory_t*)>("nvmlDeviceGetMemoryInfo");
  auto error_string = nvml.symbol<const char* (*)(nvmlReturn_t)>("nvmlErrorString");
  if (!init || !shutdown || !count || !by_index || !get_name || !get_uuid || !get_memory) {
    probe.why = library_name + " lacks the NVML functions this plugin uses";
    return probe;
  }
  auto describe_error = [&](nvmlReturn_t rc) {
    const char* text = error_string ? error_string(rc) : nullptr;
    return "NVML error " + std::to_string(rc) + (text ? std::string(" (") + text + ")" : "");
  };
  if (const nvmlReturn_t rc = init(); rc != kNvmlSuccess) {
    probe.why = "nvmlInit_v2 failed: " + describe_error(rc);
    return probe;
  }
  unsigned n = 0;
  nvmlReturn_t rc = count(&n);
  if (rc != kNvmlSuccess) {
    shutdown();
    throw Error(DH_ERROR, "nvidia: nvmlDeviceGetCount_v2 failed: " + describe_error(rc));
  }
  probe.driver = true;
  for (unsigned i = 0; i < n; ++i) {
    nvmlDevice_t device = nullptr;
    if ((rc = by_index(i, &device)) != kNvmlSuccess) {
      shutdown();
      throw Error(DH_ERROR, "nvidia: GPU " + std::to_string(i) + ": " + describe_error(rc));
    }
    Gpu gpu;
    gpu.index = std::to_string(i);
    char text[kNvmlNameLength > kNvmlUuidLength ? kNvmlNameLength : kNvmlUuidLength] = {};
    if (get_name(device, text, kNvmlNameLength) == kNvmlSuccess) gpu.name = text;
    text[0] = '\0';
    if (get_uuid(device, text, kNvmlUuidLength) == kNvmlSuccess) gpu.uuid = text;
    nvmlMemory_t memory{};
    if (get_memory(device, &memory) == kNvmlSuccess) {
      gpu.memory_total_mib = memory.total / (1024ull * 1024ull);
    }
    probe.gpus.push_back(std::move(gpu));
  }
  shutdown();
  return probe;
}

// The file `program` names: itself when it holds a '/', else the first executable on PATH.
std::string findProgram(const std::string& program) {
  auto executable = [](const std::string& path) {
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
           ::access(path.c_str(), X_OK) == 0;
  };
  if (program.find('/') != std::string::npos) return executable(program) ? program : "";
  const char* path = ::getenv("PATH");
  std::istringstream dirs(path ? path : "/usr/bin:/bin");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    std::string candidate = (dir.empty() ? "." : dir) + "/" + program;
    if (executable(candidate)) return candidate;
  }
  return "";
}

// nvidia-smi run to its end or the deadline (plugins/common/bounded_run.h).
BoundedRun runProgram(const std::vector<std::string>& args, std::chrono::milliseconds timeout) {
  try {
    return dockhand::plugins::runBounded(args, timeout);
  } catch (const std::runtime_error& e) {
    throw Error(DH_ERROR, std::string("nvidia: ") + e.what());
  }
}

std::string trim(const std::string& text) {
  const auto first = text.find_first_not_of(" \t\r\n");
  if (first == std::string::npos) return "";
  const auto last = text.find_last_not_of(" \t\r\n");
  return text.substr(first, last - first + 1);
}

std::string excerpt(const std::string& text) {
  std::string out = trim(text.size() > 2000 ? text.substr(0, 2000) + "..." : text);
  return out.empty() ? "(nothing)" : out;
}

// Parses `index, name, uuid, memory.total` lines (csv, noheader, nounits). A name may hold
// commas, so the index is the first field and the UUID and memory the last two.
std::vector<Gpu> parseSmi(const std::string& out, const std::string& program) {
  std::vector<Gpu> gpus;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    if (trim(line).empty()) continue;
    std::vector<std::string> fields;
    std::istringstream cells(line);
    for (std::string cell; std::getline(cells, cell, ',');) fields.push_back(trim(cell));
    if (fields.size() < 4) {
      throw Error(DH_ERROR, "nvidia: " + program + " printed a line that is not " +
                                "'index, name, uuid, memory.total': " + excerpt(line));
    }
    Gpu gpu;
    gpu.index = fields.front();
    if (gpu.index.empty() || gpu.index.find_first_not_of("0123456789") != std::string::npos) {
      throw Error(DH_ERROR, "nvidia: " + program +
                                " printed a GPU index that is not a number: " + excerpt(line));
    }
    for (std::size_t i = 1; i + 2 < fields.size(); ++i) {
      gpu.name += (i > 1 ? "," : "") + fields[i];
    }
    gpu.uuid = fields[fields.size() - 2];
    const std::string& memory = fields.back();
    if (!memory.empty() && memory.find_first_not_of("0123456789") == std::string::npos) {
      gpu.memory_total_mib = std::stoull(memory);
    }
    gpus.push_back(std::move(gpu));
  }
  return gpus;
}

class NvidiaDiscovery : public dockhand::sdk::ResourceDiscovery {
 public:
  static constexpr const char* kConfigSchema = R"({
    "type": "object",
    "properties": {
      "nvml_library": {"type": "string"},
      "nvidia_smi": {"type": "string"},
      "timeout_ms": {"type": "integer", "minimum": 1, "maximum": 3600000},
      "resource": {"type": "string", "minLength": 1}
    },
    "additionalProperties": false
  })";

  NvidiaDiscovery(dockhand::sdk::Host host, std::string_view config_json) : host_(host) {
    const json config = json::parse(config_json);
    nvml_library_ = config.value("nvml_library", std::string("libnvidia-ml.so.1"));
    nvidia_smi_ = config.value("nvidia_smi", std::string("nvidia-smi"));
    timeout_ = std::chrono::milliseconds(config.value("timeout_ms", 10000));
    resource_ = config.value("resource", std::string("gpu"));
  }

  std::optional<std::string> discover(std::string_view request_json) override {
    const json request = json::parse(request_json);
    const std::string name = request.at("name").get<std::string>();
    if (name != resource_) return std::nullopt;
    std::lock_guard<std::mutex> lock(mutex_);
    probe();
    if (!probe_.driver) {
      host_.info("no NVIDIA driver found (" + probe_.why + "); declining resource '" + name + "'");
      return std::nullopt;
    }
    json addresses = json::array();
    for (const auto& gpu : probe_.gpus) addresses.push_back(gpu.index);
    host_.info("resource '" + name + "': " + std::to_string(probe_.gpus.size()) +
               " NVIDIA GPU(s) found through " + source_);
    return json{{"name", name}, {"addresses", addresses}}.dump();
  }

  std::string describe() override {
    std::lock_guard<std::mutex> lock(mutex_);
    probe();
    json gpus = json::array();
    for (const auto& gpu : probe_.gpus) {
      gpus.push_back({{"index", gpu.index},
                      {"name", gpu.name},
                      {"uuid", gpu.uuid},
                      {"memory_total_mib", gpu.memory_total_mib}});
    }
    json out = {{"driver", probe_.driver}, {"source", source_}, {"gpus", gpus}};
    if (!probe_.driver) out["reason"] = probe_.why;
    return out.dump();
  }

 private:
  // Finds the GPUs once; later calls reuse what was found.
  void probe() {
    if (probed_) return;
    std::vector<std::string> whys;
    if (!nvml_library_.empty()) {
      Probe nvml = probeNvml(nvml_library_);
      if (nvml.driver) {
        probe_ = std::move(nvml);
        source_ = "nvml";
        probed_ = true;
        return;
      }
      host_.debug("NVML not usable: " + nvml.why + "; trying nvidia-smi");
      whys.push_back(nvml.why);
    }
    if (!nvidia_smi_.empty()) {
      Probe smi = probeSmi();
      if (smi.driver) {
        probe_ = std::move(smi);
        source_ = "nvidia-smi";
        probed_ = true;
        return;
      }
      whys.push_back(smi.why);
    }
    probe_ = Probe{};
    for (const auto& why : whys) probe_.why += (probe_.why.empty() ? "" : "; ") + why;
    if (probe_.why.empty()) probe_.why = "NVML and nvidia-smi are both switched off";
    source_ = "none";
    probed_ = true;
  }

  Probe probeSmi() {
    Probe probe;
    const std::string program = findProgram(nvidia_smi_);
    if (program.empty()) {
      probe.why = nvidia_smi_ + " not found" +
                  (nvidia_smi_.find('/') == std::string::npos ? " on the PATH" : "");
      return probe;
    }
    BoundedRun run = runProgram(
        {program, "--query-gpu=index,name,uuid,memory.total", "--format=csv,noheader,nounits"},
        timeout_);
    if (run.timed_out) {
      throw Error(DH_ERROR, "nvidia: " + program + " timed out after " +
                                std::to_string(timeout_.count()) +
                                " ms (killed; raise timeout_ms in the nvidia plugin's config)");
    }
    if (run.signal != 0 || run.exit_code != 0) {
      // nvidia-smi installed without a working driver ("couldn't communicate with the NVIDIA
      // driver") exits non-zero: there is no GPU to offer.
      probe.why = program + " " +
                  (run.signal != 0 ? "was killed by signal " + std::to_string(run.signal)
                                   : "exited with code " + std::to_string(run.exit_code)) +
                  ": " + excerpt(run.out + run.err);
      return probe;
    }
    probe.gpus = parseSmi(run.out, program);
    probe.driver = true;
    return probe;
  }

  dockhand::sdk::Host host_;
  std::string nvml_library_;
  std::string nvidia_smi_;
  std::chrono::milliseconds timeout_{10000};
  std::string resource_;
  std::mutex mutex_;
  bool probed_ = false;
  Probe probe_;
  std::string source_ = "none";
};

}  // namespace

DOCKHAND_PLUGIN(NvidiaDiscovery, "nvidia", "0.1.0",
                "NVIDIA GPUs through NVML, or nvidia-smi when NVML is absent")
