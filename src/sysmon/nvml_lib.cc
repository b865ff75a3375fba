#include "sysmon/nvml_lib.h"

#include <dlfcn.h>

#include <cstdlib>

namespace trainscope::sysmon {
namespace {

template <typename Fn>
void Resolve(void* handle, const char* name, Fn* fn) {
  *fn = reinterpret_cast<Fn>(::dlsym(handle, name));
}

}  // namespace

std::string NvmlLib::DefaultPath() {
  const char* env = std::getenv("TRAINSCOPE_NVML_LIB");
  return env != nullptr && *env != '\0' ? env : "libnvidia-ml.so.1";
}

std::unique_ptr<NvmlLib> NvmlLib::Open(const std::string& path, std::string* why) {
  std::unique_ptr<NvmlLib> lib(new NvmlLib());
  lib->handle_ = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib->handle_ == nullptr) {
    const char* err = ::dlerror();
    *why = "cannot open " + path + ": " + (err ? err : "unknown error");
    return nullptr;
  }
  void* h = lib->handle_;
  NvmlApi& a = lib->api_;
  Resolve(h, "nvmlInit_v2", &a.Init);
  Resolve(h, "nvmlShutdown", &a.Shutdown);
  Resolve(h, "nvmlErrorString", &a.ErrorString);
  Resolve(h, "nvmlDeviceGetCount_v2", &a.DeviceGetCount);
  Resolve(h, "nvmlDeviceGetHandleByIndex_v2", &a.DeviceGetHandleByIndex);
  Resolve(h, "nvmlDeviceGetName", &a.DeviceGetName);
  Resolve(h, "nvmlDeviceGetUtilizationRates", &a.DeviceGetUtilizationRates);
  Resolve(h, "nvmlDeviceGetMemoryInfo", &a.DeviceGetMemoryInfo);
  Resolve(h, "nvmlDeviceGetPowerUsage", &a.DeviceGetPowerUsage);
  Resolve(h, "nvmlDeviceGetEnforcedPowerLimit", &a.DeviceGetEnforcedPowerLimit);
  Resolve(h, "nvmlDeviceGetTemperature", &a.DeviceGetTemperature);
  Resolve(h, "nvmlDeviceGetClockInfo", &a.DeviceGetClockInfo);
  Resolve(h, "nvmlDeviceGetComputeRunningProcesses_v3", &a.DeviceGetComputeRunningProcesses_v3);
  Resolve(h, "nvmlDeviceGetComputeRunningProcesses_v2", &a.DeviceGetComputeRunningProcesses_v2);
  Resolve(h, "nvmlDeviceGetComputeRunningProcesses", &a.DeviceGetComputeRunningProcesses_v1);
  Resolve(h, "nvmlGpmQueryDeviceSupport", &a.GpmQueryDeviceSupport);
  Resolve(h, "nvmlGpmSampleAlloc", &a.GpmSampleAlloc);
  Resolve(h, "nvmlGpmSampleFree", &a.GpmSampleFree);
  Resolve(h, "nvmlGpmSampleGet", &a.GpmSampleGet);
  Resolve(h, "nvmlGpmMetricsGet", &a.GpmMetricsGet);
  for (auto [fn, name] :
       {std::pair{reinterpret_cast<void*>(a.Init), "nvmlInit_v2"},
        {reinterpret_cast<void*>(a.Shutdown), "nvmlShutdown"},
        {reinterpret_cast<void*>(a.DeviceGetCount), "nvmlDeviceGetCount_v2"},
        {reinterpret_cast<void*>(a.DeviceGetHandleByIndex), "nvmlDeviceGetHandleByIndex_v2"}}) {
    if (fn == nullptr) {
      *why = std::string("missing symbol ") + name + " in " + path;
      return nullptr;
    }
  }
  nvmlReturn_t r = a.Init();
  if (r != NVML_SUCCESS) {
    *why = "nvmlInit_v2 failed: " + lib->ErrorName(r);
    return nullptr;
  }
  lib->initialized_ = true;
  return lib;
}

NvmlLib::~NvmlLib() {
  if (initialized_) api_.Shutdown();
  if (handle_ != nullptr) ::dlclose(handle_);
}

std::string NvmlLib::ErrorName(nvmlReturn_t r) const {
  const char* s = api_.ErrorString ? api_.ErrorString(r) : nullptr;
  return (s ? std::string(s) : std::string("NVML error")) + " (" + std::to_string(r) + ")";
}

}  // namespace trainscope::sysmon
