// gpu_collector.h — per-GPU metrics through NVML (see nvml_lib.h), including GPM SM and
// tensor-pipe activity on GPUs that support it (Hopper and newer).
//
// Never fails: without NVML, or when nvmlInit fails, it has zero devices and
// unavailable_reason() says why. A call that fails mid-run (NVML_ERROR_GPU_IS_LOST, ...) is
// counted in errors() and its metric left out of that sample; sampling goes on. A metric whose
// call answers NVML_ERROR_NOT_SUPPORTED is not asked for again on that device (not an error).
// Not thread-safe: one owner.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "sysmon/nvml_lib.h"

namespace trainscope::sysmon {

// One sample of one GPU. A NaN value means "not available in this sample".
struct GpuSample {
  double util, mem_util, mem_used_bytes, mem_total_bytes, power_w, power_limit_w, temp_c,
      sm_clock_mhz, sm_active, sm_occupancy, tensor_active, dram_active;
  bool has_procs = false;
  std::vector<std::pair<unsigned, uint64_t>> procs;  // (pid, used bytes) of compute processes
  GpuSample();
};

class GpuCollector {
 public:
  // `lib_path` "" means NvmlLib::DefaultPath().
  explicit GpuCollector(const std::string& lib_path);
  ~GpuCollector();
  GpuCollector(const GpuCollector&) = delete;
  GpuCollector& operator=(const GpuCollector&) = delete;

  size_t device_count() const { return devices_.size(); }
  const std::string& device_name(size_t i) const { return devices_[i].name; }
  bool gpm_supported(size_t i) const { return devices_[i].gpm; }
  const std::string& unavailable_reason() const { return unavailable_; }
  uint64_t errors() const { return errors_; }

  // Fills out->at(i) for every device (out is resized to device_count()).
  void Sample(std::vector<GpuSample>* out);

 private:
  enum Metric { kUtil, kMemory, kPower, kPowerLimit, kTemp, kClock, kProcs, kGpm, kNumMetrics };
  struct Device {
    nvmlDevice_t handle = nullptr;
    std::string name;
    bool disabled[kNumMetrics] = {};
    bool gpm = false;
    nvmlGpmSample_t gpm_samples[2] = {nullptr, nullptr};
    int gpm_current = 0;
    bool gpm_have_prev = false;
  };
  // True if r is success; counts errors, disables the metric on NOT_SUPPORTED.
  bool Check(Device& d, Metric m, nvmlReturn_t r, const char* what);
  void SampleProcesses(Device& d, GpuSample* s);
  void SampleGpm(Device& d, GpuSample* s);

  std::unique_ptr<NvmlLib> lib_;
  std::string unavailable_;
  std::vector<Device> devices_;
  uint64_t errors_ = 0;
  int proc_api_ = 3;  // 3, 2, 1; 0 when none works
  std::vector<nvmlProcessInfo_t> proc_buf_;
  std::vector<nvmlProcessInfo_v1_t> proc_buf_v1_;
  std::unique_ptr<nvmlGpmMetricsGet_t> gpm_get_;
};

}  // namespace trainscope::sysmon
