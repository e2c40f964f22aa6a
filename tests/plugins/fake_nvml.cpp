// A stand-in for libnvidia-ml.so.1 with two GPUs, exporting the NVML functions the `nvidia`
// plugin loads, so its NVML path runs on a machine without an NVIDIA driver.
#include <cstdio>
#include <cstring>

extern "C" {
// NOLINTBEGIN(readability-identifier-naming): NVML's names, which the plugin looks up

struct nvmlDevice_st {
  unsigned index;
};
struct FakeMemory {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};

namespace {
nvmlDevice_st gDevices[2] = {{0}, {1}};
bool gInitialised = false;
}  // namespace

__attribute__((visibility("default"))) int nvmlInit_v2() {
  gInitialised = true;
  return 0;
}
__attribute__((visibility("default"))) int nvmlShutdown() {
  gInitialised = false;
  return 0;
}
__attribute__((visibility("default"))) int nvmlDeviceGetCount_v2(unsigned* count) {
  if (!gInitialised) return 1;  // NVML_ERROR_UNINITIALIZED
  *count = 2;
  return 0;
}
__attribute__((visibility("default"))) int nvmlDeviceGetHandleByIndex_v2(unsigned index,
                                                                         nvmlDevice_st** device) {
  if (!gInitialised || index >= 2) return 2;  // NVML_ERROR_INVALID_ARGUMENT
  *device = &gDevices[index];
  return 0;
}
__attribute__((visibility("default"))) int nvmlDeviceGetName(nvmlDevice_st* device, char* name,
                                                             unsigned length) {
  std::snprintf(name, length, "NVIDIA H100 80GB HBM3 #%u", device->index);
  return 0;
}
__attribute__((visibility("default"))) int nvmlDeviceGetUUID(nvmlDevice_st* device, char* uuid,
                                                             unsigned length) {
  std::snprintf(uuid, length, "GPU-fake-nvml-%u", device->index);
  return 0;
}
__attribute__((visibility("default"))) int nvmlDeviceGetMemoryInfo(nvmlDevice_st* device,
                                                                   FakeMemory* memory) {
  (void)device;
  memory->total = 80ull * 1024 * 1024 * 1024;
  memory->free = memory->total;
  memory->used = 0;
  return 0;
}
__attribute__((visibility("default"))) const char* nvmlErrorString(int result) {
  return result == 0 ? "Success" : "Fake error";
}

// NOLINTEND(readability-identifier-naming)
}  // extern "C"
