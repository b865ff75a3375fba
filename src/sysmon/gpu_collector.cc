#include "sysmon/gpu_collector.h"

#include <cmath>
#include <limits>

#include "util/logging.h"

namespace trainscope::sysmon {
namespace {
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
}  // namespace

GpuSample::GpuSample()
    : util(kNaN),
      mem_util(kNaN),
      mem_used_bytes(kNaN),
      mem_total_bytes(kNaN),
      power_w(kNaN),
      power_limit_w(kNaN),
      temp_c(kNaN),
      sm_clock_mhz(kNaN),
      sm_active(kNaN),
      sm_occupancy(kNaN),
      tensor_active(kNaN),
      dram_active(kNaN) {}

GpuCollector::GpuCollector(const std::string& lib_path) {
  std::string path = lib_path.empty() ? NvmlLib::DefaultPath() : lib_path;
  lib_ = NvmlLib::Open(path, &unavailable_);
  if (lib_ == nullptr) {
    LogOnce("sysmon.nvml", LogLevel::kInfo, "sysmon: no GPU metrics (" + unavailable_ + ")");
    return;
  }
  const NvmlApi& api = lib_->api();
  unsigned int count = 0;
  nvmlReturn_t r = api.DeviceGetCount(&count);
  if (r != NVML_SUCCESS) {
    unavailable_ = "nvmlDeviceGetCount_v2 failed: " + lib_->ErrorName(r);
    LogOnce("sysmon.nvml", LogLevel::kInfo, "sysmon: no GPU metrics (" + unavailable_ + ")");
    return;
  }
  if (count > 1024) count = 1024;
  for (unsigned int i = 0; i < count; ++i) {
    Device d;
    r = api.DeviceGetHandleByIndex(i, &d.handle);
    if (r != NVML_SUCCESS) {
      // Keep the slot so gpu<i> names stay aligned with NVML indices; every call will fail.
      ++errors_;
      LogOnce("sysmon.nvml.handle", LogLevel::kWarning,
              "sysmon: GPU " + std::to_string(i) + ": " + lib_->ErrorName(r));
      for (bool& off : d.disabled) off = true;
    } else {
      char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE] = {};
      if (api.DeviceGetName && api.DeviceGetName(d.handle, name, sizeof(name)) == NVML_SUCCESS) {
        d.name = name;
      }
      nvmlGpmSupport_t support = {NVML_GPM_SUPPORT_VERSION, 0};
      if (api.HasGpm() && api.GpmQueryDeviceSupport(d.handle, &support) == NVML_SUCCESS &&
          support.isSupportedDevice && api.GpmSampleAlloc(&d.gpm_samples[0]) == NVML_SUCCESS &&
          api.GpmSampleAlloc(&d.gpm_samples[1]) == NVML_SUCCESS) {
        d.gpm = true;
      }
    }
    devices_.push_back(d);
  }
  if (!api.DeviceGetComputeRunningProcesses_v3) proc_api_ = 2;
  if (proc_api_ == 2 && !api.DeviceGetComputeRunningProcesses_v2) proc_api_ = 1;
  if (proc_api_ == 1 && !api.DeviceGetComputeRunningProcesses_v1) proc_api_ = 0;
  proc_buf_.resize(64);
  proc_buf_v1_.resize(64);
  gpm_get_ = std::make_unique<nvmlGpmMetricsGet_t>();
}

GpuCollector::~GpuCollector() {
  if (lib_ == nullptr) return;
  for (Device& d : devices_) {
    for (nvmlGpmSample_t s : d.gpm_samples) {
      if (s != nullptr) lib_->api().GpmSampleFree(s);
    }
  }
}

bool GpuCollector::Check(Device& d, Metric m, nvmlReturn_t r, const char* what) {
  if (r == NVML_SUCCESS) return true;
  if (r == NVML_ERROR_NOT_SUPPORTED) {
    d.disabled[m] = true;
    return false;
  }
  ++errors_;
  LogOnce(std::string("sysmon.nvml.") + what, LogLevel::kWarning,
          std::string("sysmon: ") + what + " failed: " + lib_->ErrorName(r) +
              " (counted in sysmon.errors; sampling continues)");
  return false;
}

void GpuCollector::Sample(std::vector<GpuSample>* out) {
  out->resize(devices_.size());
  if (lib_ == nullptr) return;
  const NvmlApi& api = lib_->api();
  for (size_t i = 0; i < devices_.size(); ++i) {
    Device& d = devices_[i];
    GpuSample& s = (*out)[i];
    s = GpuSample();
    if (api.DeviceGetUtilizationRates && !d.disabled[kUtil]) {
      nvmlUtilization_t u;
      if (Check(d, kUtil, api.DeviceGetUtilizationRates(d.handle, &u),
                "nvmlDeviceGetUtilizationRates")) {
        s.util = u.gpu;
        s.mem_util = u.memory;
      }
    }
    if (api.DeviceGetMemoryInfo && !d.disabled[kMemory]) {
      nvmlMemory_t m;
      if (Check(d, kMemory, api.DeviceGetMemoryInfo(d.handle, &m), "nvmlDeviceGetMemoryInfo")) {
        s.mem_used_bytes = static_cast<double>(m.used);
        s.mem_total_bytes = static_cast<double>(m.total);
      }
    }
    unsigned int v = 0;
    if (api.DeviceGetPowerUsage && !d.disabled[kPower] &&
        Check(d, kPower, api.DeviceGetPowerUsage(d.handle, &v), "nvmlDeviceGetPowerUsage")) {
      s.power_w = v / 1000.0;
    }
    if (api.DeviceGetEnforcedPowerLimit && !d.disabled[kPowerLimit] &&
        Check(d, kPowerLimit, api.DeviceGetEnforcedPowerLimit(d.handle, &v),
              "nvmlDeviceGetEnforcedPowerLimit")) {
      s.power_limit_w = v / 1000.0;
    }
    if (api.DeviceGetTemperature && !d.disabled[kTemp] &&
        Check(d, kTemp, api.DeviceGetTemperature(d.handle, NVML_TEMPERATURE_GPU, &v),
              "nvmlDeviceGetTemperature")) {
      s.temp_c = v;
    }
    if (api.DeviceGetClockInfo && !d.disabled[kClock] &&
        Check(d, kClock, api.DeviceGetClockInfo(d.handle, NVML_CLOCK_SM, &v),
              "nvmlDeviceGetClockInfo")) {
      s.sm_clock_mhz = v;
    }
    if (proc_api_ != 0 && !d.disabled[kProcs]) SampleProcesses(d, &s);
    if (d.gpm && !d.disabled[kGpm]) SampleGpm(d, &s);
  }
}

void GpuCollector::SampleProcesses(Device& d, GpuSample* s) {
  const NvmlApi& api = lib_->api();
  for (int attempt = 0; attempt < 4 && proc_api_ != 0; ++attempt) {
    unsigned int count = static_cast<unsigned int>(proc_buf_.size());
    nvmlReturn_t r;
    if (proc_api_ == 3) {
      r = api.DeviceGetComputeRunningProcesses_v3(d.handle, &count, proc_buf_.data());
    } else if (proc_api_ == 2) {
      r = api.DeviceGetComputeRunningProcesses_v2(d.handle, &count, proc_buf_.data());
    } else {
      r = api.DeviceGetComputeRunningProcesses_v1(d.handle, &count, proc_buf_v1_.data());
    }
    if (r == NVML_ERROR_FUNCTION_NOT_FOUND) {  // an older driver behind a newer symbol
      proc_api_ = proc_api_ == 3 && api.DeviceGetComputeRunningProcesses_v2   ? 2
                  : proc_api_ >= 2 && api.DeviceGetComputeRunningProcesses_v1 ? 1
                                                                              : 0;
      continue;
    }
    if (r == NVML_ERROR_INSUFFICIENT_SIZE && count < 65536) {
      proc_buf_.resize(count + 16);
      proc_buf_v1_.resize(count + 16);
      continue;
    }
    if (!Check(d, kProcs, r, "nvmlDeviceGetComputeRunningProcesses")) return;
    s->has_procs = true;
    s->procs.clear();
    for (unsigned int k = 0; k < count; ++k) {
      unsigned pid = proc_api_ == 1 ? proc_buf_v1_[k].pid : proc_buf_[k].pid;
      unsigned long long mem =
          proc_api_ == 1 ? proc_buf_v1_[k].usedGpuMemory : proc_buf_[k].usedGpuMemory;
      s->procs.emplace_back(pid, mem == NVML_VALUE_NOT_AVAILABLE_ULL ? 0 : mem);
    }
    return;
  }
}

void GpuCollector::SampleGpm(Device& d, GpuSample* s) {
  const NvmlApi& api = lib_->api();
  nvmlGpmSample_t cur = d.gpm_samples[d.gpm_current];
  if (!Check(d, kGpm, api.GpmSampleGet(d.handle, cur), "nvmlGpmSampleGet")) {
    d.gpm_have_prev = false;
    return;
  }
  if (d.gpm_have_prev) {
    nvmlGpmMetricsGet_t& g = *gpm_get_;
    const unsigned int ids[] = {NVML_GPM_METRIC_SM_UTIL, NVML_GPM_METRIC_SM_OCCUPANCY,
                                NVML_GPM_METRIC_ANY_TENSOR_UTIL, NVML_GPM_METRIC_DRAM_BW_UTIL};
    double* dst[] = {&s->sm_active, &s->sm_occupancy, &s->tensor_active, &s->dram_active};
    g.version = NVML_GPM_METRICS_GET_VERSION;
    g.numMetrics = 4;
    g.sample1 = d.gpm_samples[1 - d.gpm_current];
    g.sample2 = cur;
    for (unsigned int k = 0; k < 4; ++k) {
      g.metrics[k] = nvmlGpmMetric_t();
      g.metrics[k].metricId = ids[k];
    }
    if (Check(d, kGpm, api.GpmMetricsGet(&g), "nvmlGpmMetricsGet")) {
      for (unsigned int k = 0; k < 4; ++k) {
        if (g.metrics[k].nvmlReturn == NVML_SUCCESS) *dst[k] = g.metrics[k].value;
      }
    }
  }
  d.gpm_have_prev = true;
  d.gpm_current = 1 - d.gpm_current;
}

}  // namespace trainscope::sysmon
