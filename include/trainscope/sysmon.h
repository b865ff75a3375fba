// trainscope/sysmon.h — the system monitor: samples CPU, memory, disk, network, pressure,
// cgroup limits, the training's process tree and the GPUs at a fixed interval and hands each
// sample to a sink as a SystemSampleRecord (metric names: docs/metrics.md).
//
// Everything it reads comes from an injected root directory ("/" in production, a recorded
// tree in tests) and an NVML library loaded at run time (none is fine: zero GPUs). Sampling
// never fails the caller: unreadable or malformed sources keep their previous values and are
// counted in the "sysmon.errors" metric and in stats().
//
// Threading: Start() runs one sampling thread that wakes at absolute deadlines
// (start + k * interval), so the schedule does not drift; Stop() wakes it at once and joins it;
// the destructor calls Stop(). The sink is called on the sampling thread, never under a lock.
// SampleOnce() does the same work synchronously (for tests and for callers with their own
// loop); don't call it while the thread runs.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "trainscope/status.h"
#include "trainscope/types.h"

namespace trainscope {

struct SystemSamplerOptions {
  int64_t interval_ms = 500;     // 100 .. 60000, else Create() returns InvalidArgument
  std::string root = "/";        // where /proc and /sys are read from
  int root_pid = 0;              // root of the monitored process tree; 0 = this process
  bool per_core = true;          // cpu.core<N>.util
  bool per_core_detail = false;  // also cpu.core<N>.user / .system / .iowait
  bool per_process = true;       // proc.<pid>.cpu_util / .rss_bytes for each tree member
  // Full /proc scan for the tree every N samples; in between only members and their main
  // thread's children are read (see docs/metrics.md). 1 = full scan every sample.
  int process_rescan_every = 10;
  bool gpu = true;
  std::string nvml_library;  // "" = $TRAINSCOPE_NVML_LIB, else "libnvidia-ml.so.1"
  // 0 = sysconf(_SC_CLK_TCK) / sysconf(_SC_PAGESIZE); set them for fixtures from other hosts.
  int64_t clock_ticks_per_s = 0;
  int64_t page_size = 0;
};

using SystemSampleSink = std::function<void(SystemSampleRecord)>;

struct SystemSamplerStats {
  uint64_t samples = 0;
  uint64_t errors = 0;  // all below, summed (the "sysmon.errors" metric)
  uint64_t cpu_errors = 0, mem_errors = 0, disk_errors = 0, net_errors = 0, pressure_errors = 0,
           cgroup_errors = 0, process_errors = 0, gpu_errors = 0, sink_errors = 0;
  uint64_t deadlines_missed = 0;    // intervals skipped because a sample overran
  int64_t sample_cpu_us_total = 0;  // thread CPU time spent in SampleOnce
  size_t gpu_count = 0;
  std::string gpu_unavailable_reason;  // "" when NVML loaded
};

class SystemSampler {
 public:
  // Validates `options` and opens the sources (including NVML). `sink` must not be empty.
  static Result<std::unique_ptr<SystemSampler>> Create(SystemSamplerOptions options,
                                                       SystemSampleSink sink);
  ~SystemSampler();  // Stop()s and joins
  SystemSampler(const SystemSampler&) = delete;
  SystemSampler& operator=(const SystemSampler&) = delete;

  Status Start();  // AlreadyExists if running
  void Stop();     // idempotent; returns once the thread has exited

  // One sample now: `monotonic_us` drives rates (time between samples), `wall_us` is the
  // record's timestamp. Emits to the sink. The first sample has gauges only (no rates).
  void SampleOnce(int64_t monotonic_us, int64_t wall_us);

  SystemSamplerStats stats() const;  // thread-safe snapshot

 private:
  class Impl;
  explicit SystemSampler(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace trainscope
