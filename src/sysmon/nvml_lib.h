// nvml_lib.h — NVIDIA's management library loaded at run time with dlopen(), so trainscope
// builds and runs on machines without it. Open() resolves the symbols it needs: the four core
// ones (init, shutdown, device count, handle by index) are required; every other one is
// optional and its metric is simply skipped when missing. Not thread-safe: one owner.
#pragma once

#include <memory>
#include <string>

#include "sysmon/nvml_types.h"

namespace trainscope::sysmon {

struct NvmlApi {
  nvmlReturn_t (*Init)() = nullptr;  // nvmlInit_v2
  nvmlReturn_t (*Shutdown)() = nullptr;
  const char* (*ErrorString)(nvmlReturn_t) = nullptr;
  nvmlReturn_t (*DeviceGetCount)(unsigned int*) = nullptr;                        // _v2
  nvmlReturn_t (*DeviceGetHandleByIndex)(unsigned int, nvmlDevice_t*) = nullptr;  // _v2
  nvmlReturn_t (*DeviceGetName)(nvmlDevice_t, char*, unsigned int) = nullptr;
  nvmlReturn_t (*DeviceGetUtilizationRates)(nvmlDevice_t, nvmlUtilization_t*) = nullptr;
  nvmlReturn_t (*DeviceGetMemoryInfo)(nvmlDevice_t, nvmlMemory_t*) = nullptr;
  nvmlReturn_t (*DeviceGetPowerUsage)(nvmlDevice_t, unsigned int*) = nullptr;          // mW
  nvmlReturn_t (*DeviceGetEnforcedPowerLimit)(nvmlDevice_t, unsigned int*) = nullptr;  // mW
  nvmlReturn_t (*DeviceGetTemperature)(nvmlDevice_t, nvmlTemperatureSensors_t,
                                       unsigned int*) = nullptr;
  nvmlReturn_t (*DeviceGetClockInfo)(nvmlDevice_t, nvmlClockType_t, unsigned int*) = nullptr;
  // Running compute processes: v3 and v2 fill nvmlProcessInfo_t, v1 the shorter struct.
  nvmlReturn_t (*DeviceGetComputeRunningProcesses_v3)(nvmlDevice_t, unsigned int*,
                                                      nvmlProcessInfo_t*) = nullptr;
  nvmlReturn_t (*DeviceGetComputeRunningProcesses_v2)(nvmlDevice_t, unsigned int*,
                                                      nvmlProcessInfo_t*) = nullptr;
  nvmlReturn_t (*DeviceGetComputeRunningProcesses_v1)(nvmlDevice_t, unsigned int*,
                                                      nvmlProcessInfo_v1_t*) = nullptr;
  // GPM (all four or none are used).
  nvmlReturn_t (*GpmQueryDeviceSupport)(nvmlDevice_t, nvmlGpmSupport_t*) = nullptr;
  nvmlReturn_t (*GpmSampleAlloc)(nvmlGpmSample_t*) = nullptr;
  nvmlReturn_t (*GpmSampleFree)(nvmlGpmSample_t) = nullptr;
  nvmlReturn_t (*GpmSampleGet)(nvmlDevice_t, nvmlGpmSample_t) = nullptr;
  nvmlReturn_t (*GpmMetricsGet)(nvmlGpmMetricsGet_t*) = nullptr;

  bool HasGpm() const {
    return GpmQueryDeviceSupport && GpmSampleAlloc && GpmSampleFree && GpmSampleGet &&
           GpmMetricsGet;
  }
};

class NvmlLib {
 public:
  // The library path used when none is given: $TRAINSCOPE_NVML_LIB, else "libnvidia-ml.so.1".
  static std::string DefaultPath();

  // dlopen()s `path` and calls nvmlInit_v2. nullptr with *why set ("cannot open ...: ...",
  // "missing symbol ...", "nvmlInit_v2 failed: ...") when NVML is unusable — which callers
  // report as "no GPU", not as an error.
  static std::unique_ptr<NvmlLib> Open(const std::string& path, std::string* why);

  ~NvmlLib();  // nvmlShutdown + dlclose
  NvmlLib(const NvmlLib&) = delete;
  NvmlLib& operator=(const NvmlLib&) = delete;

  const NvmlApi& api() const { return api_; }
  std::string ErrorName(nvmlReturn_t r) const;

 private:
  NvmlLib() = default;
  void* handle_ = nullptr;
  bool initialized_ = false;
  NvmlApi api_;
};

}  // namespace trainscope::sysmon
