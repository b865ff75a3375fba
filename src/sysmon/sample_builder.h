// sample_builder.h — turns the collectors' snapshots into one SystemSampleRecord: reads every
// source, computes rates against the previous good snapshot, names the metrics
// (docs/metrics.md). A source that fails to read or parse keeps its previous metrics (emitted
// again unchanged) and its error counter goes up. Not thread-safe: owned by the sampler.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "sysmon/cgroup.h"
#include "sysmon/cpu_stat.h"
#include "sysmon/diskstats.h"
#include "sysmon/gpu_collector.h"
#include "sysmon/meminfo.h"
#include "sysmon/netdev.h"
#include "sysmon/pressure.h"
#include "sysmon/process_tree.h"
#include "trainscope/sysmon.h"
#include "trainscope/types.h"

namespace trainscope::sysmon {

using Metrics = std::vector<std::pair<std::string, double>>;

class SampleBuilder {
 public:
  explicit SampleBuilder(const SystemSamplerOptions& options);

  // Appends this sample's metrics to *out. `monotonic_us` must not go backwards.
  void Build(int64_t monotonic_us, Metrics* out);

  // Error counters per source, and the GPU collector (for its device count / reason).
  struct Errors {
    uint64_t cpu = 0, mem = 0, disk = 0, net = 0, pressure = 0, cgroup = 0, process = 0;
  };
  Errors errors() const;
  uint64_t gpu_errors() const { return gpu_ ? gpu_->errors() : 0; }
  const GpuCollector* gpu() const { return gpu_.get(); }

 private:
  // A source's previous good snapshot and its last emitted metrics.
  template <typename Snap>
  struct State {
    Snap prev;
    int64_t prev_us = 0;
    bool have_prev = false;
    Metrics last;
    uint64_t errors = 0;
  };

  void BuildCpu(int64_t now_us, Metrics* out);
  void BuildMem(Metrics* out);
  void BuildDisk(int64_t now_us, Metrics* out);
  void BuildNet(int64_t now_us, Metrics* out);
  void BuildPressure(int64_t now_us, Metrics* out);
  void BuildCgroup(int64_t now_us, Metrics* out);
  void BuildProcesses(int64_t now_us, Metrics* out);
  void BuildGpu(Metrics* out);

  SystemSamplerOptions options_;
  double ticks_per_s_;
  double page_size_;
  std::string buf_;
  KernelFileCache files_;  // system-wide and cgroup files, kept open between samples

  std::string stat_path_, meminfo_path_, diskstats_path_, netdev_path_;
  State<CpuSnapshot> cpu_;
  CpuSnapshot cpu_scratch_;
  State<MemInfo> mem_;
  State<DiskSnapshot> disk_;
  State<NetSnapshot> net_;

  struct PressureSource {
    std::string name, path;
    State<Pressure> state;
  };
  std::vector<PressureSource> pressure_;

  bool cgroup_resolved_ = false;
  CgroupPaths cgroup_paths_;
  State<CgroupSnapshot> cgroup_;

  std::unique_ptr<ProcessTreeCollector> process_collector_;
  State<ProcessSnapshot> process_;
  uint64_t process_malformed_seen_ = 0;

  std::unique_ptr<GpuCollector> gpu_;
  std::vector<GpuSample> gpu_samples_;
};

}  // namespace trainscope::sysmon
