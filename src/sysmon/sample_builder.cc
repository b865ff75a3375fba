#include "sysmon/sample_builder.h"

#include <unistd.h>

#include <cmath>
#include <unordered_set>

#include "sysmon/proc_file.h"
#include "trainscope/schema.h"

namespace trainscope::sysmon {
namespace {

double Seconds(int64_t a_us, int64_t b_us) { return (b_us - a_us) / 1e6; }

}  // namespace

SampleBuilder::SampleBuilder(const SystemSamplerOptions& options) : options_(options) {
  ticks_per_s_ = options.clock_ticks_per_s > 0 ? options.clock_ticks_per_s
                                               : static_cast<double>(::sysconf(_SC_CLK_TCK));
  page_size_ =
      options.page_size > 0 ? options.page_size : static_cast<double>(::sysconf(_SC_PAGESIZE));
  if (options_.root_pid <= 0) options_.root_pid = static_cast<int>(::getpid());
  stat_path_ = RootedPath(options.root, "/proc/stat");
  meminfo_path_ = RootedPath(options.root, "/proc/meminfo");
  diskstats_path_ = RootedPath(options.root, "/proc/diskstats");
  netdev_path_ = RootedPath(options.root, "/proc/net/dev");
  for (const char* r : schema::psi::kResources) {
    pressure_.push_back({r, RootedPath(options.root, std::string("/proc/pressure/") + r), {}});
  }
  process_collector_ = std::make_unique<ProcessTreeCollector>(options.root, options_.root_pid,
                                                              options.process_rescan_every);
  if (options.gpu) gpu_ = std::make_unique<GpuCollector>(options.nvml_library);
}

SampleBuilder::Errors SampleBuilder::errors() const {
  Errors e;
  e.cpu = cpu_.errors;
  e.mem = mem_.errors;
  e.disk = disk_.errors;
  e.net = net_.errors;
  for (const PressureSource& p : pressure_) e.pressure += p.state.errors;
  e.cgroup = cgroup_.errors;
  e.process = process_.errors;
  return e;
}

void SampleBuilder::Build(int64_t now_us, Metrics* out) {
  BuildCpu(now_us, out);
  BuildMem(out);
  BuildDisk(now_us, out);
  BuildNet(now_us, out);
  BuildPressure(now_us, out);
  BuildCgroup(now_us, out);
  BuildProcesses(now_us, out);
  BuildGpu(out);
  files_.EndSample();
}

void SampleBuilder::BuildCpu(int64_t now_us, Metrics* out) {
  if (ReadSmallFile(stat_path_, &buf_, &files_) != ReadResult::kOk ||
      !ParseProcStat(buf_, &cpu_scratch_)) {
    ++cpu_.errors;
  } else {
    if (cpu_.have_prev) {
      CpuRates r = ComputeCpuRates(cpu_.prev, cpu_scratch_);
      if (r.valid) {
        Metrics& m = cpu_.last;
        m.clear();
        m.emplace_back(schema::kCpuUtil, r.total.util);
        m.emplace_back(schema::kCpuUser, r.total.user);
        m.emplace_back(schema::kCpuSystem, r.total.system);
        m.emplace_back(schema::kCpuIowait, r.total.iowait);
        m.emplace_back(schema::kCpuIdle, r.total.idle);
        m.emplace_back(schema::kCpuSteal, r.total.steal);
        if (options_.per_core) {
          for (size_t i = 0; i < r.core_ids.size(); ++i) {
            const int id = r.core_ids[i];
            m.emplace_back(schema::CoreMetric(id, schema::core::kUtil), r.cores[i].util);
            if (options_.per_core_detail) {
              m.emplace_back(schema::CoreMetric(id, schema::core::kUser), r.cores[i].user);
              m.emplace_back(schema::CoreMetric(id, schema::core::kSystem), r.cores[i].system);
              m.emplace_back(schema::CoreMetric(id, schema::core::kIowait), r.cores[i].iowait);
            }
          }
        }
      }
    }
    std::swap(cpu_.prev, cpu_scratch_);
    cpu_.have_prev = true;
    // cpu.count is a gauge of the latest good snapshot.
    if (!cpu_.last.empty() && cpu_.last.back().first == schema::kCpuCount) cpu_.last.pop_back();
    cpu_.last.emplace_back(schema::kCpuCount, static_cast<double>(cpu_.prev.cores.size()));
  }
  out->insert(out->end(), cpu_.last.begin(), cpu_.last.end());
}

void SampleBuilder::BuildMem(Metrics* out) {
  MemInfo mi;
  if (ReadSmallFile(meminfo_path_, &buf_, &files_) != ReadResult::kOk || !ParseMemInfo(buf_, &mi)) {
    ++mem_.errors;
  } else {
    Metrics& m = mem_.last;
    m.clear();
    m.emplace_back(schema::kMemTotalBytes, static_cast<double>(mi.total));
    m.emplace_back(schema::kMemUsedBytes, static_cast<double>(mi.Used()));
    m.emplace_back(schema::kMemAvailableBytes, static_cast<double>(mi.available));
    m.emplace_back(schema::kMemFreeBytes, static_cast<double>(mi.free));
    m.emplace_back(schema::kMemUtil, mi.total ? 100.0 * mi.Used() / mi.total : 0.0);
    m.emplace_back(
        schema::kMemSwapUsedBytes,
        static_cast<double>(mi.swap_total > mi.swap_free ? mi.swap_total - mi.swap_free : 0));
  }
  out->insert(out->end(), mem_.last.begin(), mem_.last.end());
}

void SampleBuilder::BuildDisk(int64_t now_us, Metrics* out) {
  DiskSnapshot snap;
  if (ReadSmallFile(diskstats_path_, &buf_, &files_) != ReadResult::kOk ||
      !ParseDiskStats(buf_, &snap)) {
    ++disk_.errors;
  } else {
    if (disk_.have_prev) {
      DiskRates r = ComputeDiskRates(disk_.prev, snap, Seconds(disk_.prev_us, now_us));
      Metrics& m = disk_.last;
      m.clear();
      m.emplace_back(schema::kDiskReadBytesPerS, r.read_bytes_per_s);
      m.emplace_back(schema::kDiskWriteBytesPerS, r.write_bytes_per_s);
      m.emplace_back(schema::kDiskReadOpsPerS, r.read_ops_per_s);
      m.emplace_back(schema::kDiskWriteOpsPerS, r.write_ops_per_s);
      m.emplace_back(schema::kDiskBusyPct, r.busy_pct);
    }
    disk_.prev = std::move(snap);
    disk_.prev_us = now_us;
    disk_.have_prev = true;
  }
  out->insert(out->end(), disk_.last.begin(), disk_.last.end());
}

void SampleBuilder::BuildNet(int64_t now_us, Metrics* out) {
  NetSnapshot snap;
  if (ReadSmallFile(netdev_path_, &buf_, &files_) != ReadResult::kOk || !ParseNetDev(buf_, &snap)) {
    ++net_.errors;
  } else {
    if (net_.have_prev) {
      NetRates r = ComputeNetRates(net_.prev, snap, Seconds(net_.prev_us, now_us));
      Metrics& m = net_.last;
      m.clear();
      m.emplace_back(schema::kNetRxBytesPerS, r.rx_bytes_per_s);
      m.emplace_back(schema::kNetTxBytesPerS, r.tx_bytes_per_s);
      m.emplace_back(schema::kNetRxPacketsPerS, r.rx_packets_per_s);
      m.emplace_back(schema::kNetTxPacketsPerS, r.tx_packets_per_s);
    }
    net_.prev = std::move(snap);
    net_.prev_us = now_us;
    net_.have_prev = true;
  }
  out->insert(out->end(), net_.last.begin(), net_.last.end());
}

void SampleBuilder::BuildPressure(int64_t now_us, Metrics* out) {
  for (PressureSource& p : pressure_) {
    Pressure snap;
    ReadResult rr = ReadSmallFile(p.path, &buf_, &files_);
    if (rr == ReadResult::kMissing) continue;  // kernel without PSI: not an error
    if (rr != ReadResult::kOk || !ParsePressure(buf_, &snap)) {
      ++p.state.errors;
    } else {
      Metrics& m = p.state.last;
      m.clear();
      m.emplace_back(schema::PsiMetric(p.name, schema::psi::kSomeAvg10), snap.some.avg10);
      if (snap.full.present) {
        m.emplace_back(schema::PsiMetric(p.name, schema::psi::kFullAvg10), snap.full.avg10);
      }
      if (p.state.have_prev) {
        const double s = Seconds(p.state.prev_us, now_us);
        m.emplace_back(schema::PsiMetric(p.name, schema::psi::kSomeStallPct),
                       StallPercent(p.state.prev.some, snap.some, s));
        if (snap.full.present && p.state.prev.full.present) {
          m.emplace_back(schema::PsiMetric(p.name, schema::psi::kFullStallPct),
                         StallPercent(p.state.prev.full, snap.full, s));
        }
      }
      p.state.prev = snap;
      p.state.prev_us = now_us;
      p.state.have_prev = true;
    }
    out->insert(out->end(), p.state.last.begin(), p.state.last.end());
  }
}

void SampleBuilder::BuildCgroup(int64_t now_us, Metrics* out) {
  if (!cgroup_resolved_) {
    if (!ResolveCgroupPaths(options_.root, std::to_string(options_.root_pid), &cgroup_paths_)) {
      ++cgroup_.errors;
      return;
    }
    cgroup_resolved_ = true;
  }
  if (cgroup_paths_.cpu_version == 0 && cgroup_paths_.mem_version == 0) return;
  CgroupSnapshot snap;
  if (!ReadCgroup(cgroup_paths_, &snap, &buf_, &files_)) {
    ++cgroup_.errors;
  } else {
    Metrics& m = cgroup_.last;
    m.clear();
    if (snap.has_cpu_limit) m.emplace_back(schema::kCgroupCpuLimitCores, snap.cpu_limit_cores);
    if (snap.has_mem_limit) {
      m.emplace_back(schema::kCgroupMemLimitBytes, static_cast<double>(snap.mem_limit_bytes));
    }
    if (snap.has_mem_usage) {
      m.emplace_back(schema::kCgroupMemUsedBytes, static_cast<double>(snap.mem_usage_bytes));
    }
    if (cgroup_.have_prev) {
      CgroupRates r = ComputeCgroupRates(cgroup_.prev, snap, Seconds(cgroup_.prev_us, now_us));
      if (r.has_cpu_usage) m.emplace_back(schema::kCgroupCpuUsageCores, r.cpu_usage_cores);
      if (r.has_throttle) m.emplace_back(schema::kCgroupCpuThrottledPct, r.throttled_pct);
    }
    cgroup_.prev = snap;
    cgroup_.prev_us = now_us;
    cgroup_.have_prev = true;
  }
  out->insert(out->end(), cgroup_.last.begin(), cgroup_.last.end());
}

void SampleBuilder::BuildProcesses(int64_t now_us, Metrics* out) {
  ProcessSnapshot snap;
  bool ok = process_collector_->Collect(&snap);
  // Malformed stat files of tree members count as errors; vanished processes do not.
  process_.errors += process_collector_->malformed() - process_malformed_seen_;
  process_malformed_seen_ = process_collector_->malformed();
  if (!ok) {
    ++process_.errors;
  } else {
    Metrics& m = process_.last;
    m.clear();
    m.emplace_back(schema::kProcCount, static_cast<double>(snap.procs.size()));
    const bool have_prev = process_.have_prev;
    ProcessRates r =
        ComputeProcessRates(have_prev ? process_.prev : ProcessSnapshot(), snap,
                            Seconds(process_.prev_us, now_us), ticks_per_s_, page_size_);
    if (have_prev) m.emplace_back(schema::kProcTreeCpuUtil, r.tree_cpu_pct);
    m.emplace_back(schema::kProcTreeRssBytes, r.tree_rss_bytes);
    if (options_.per_process) {
      for (const ProcRate& p : r.procs) {
        if (have_prev) m.emplace_back(schema::ProcMetric(p.pid, schema::proc::kCpuUtil), p.cpu_pct);
        m.emplace_back(schema::ProcMetric(p.pid, schema::proc::kRssBytes), p.rss_bytes);
      }
    }
    process_.prev = std::move(snap);
    process_.prev_us = now_us;
    process_.have_prev = true;
  }
  out->insert(out->end(), process_.last.begin(), process_.last.end());
}

namespace {
// The GpuSample readings written as gpu<i>.<field>, in the order written.
constexpr std::pair<const char*, double GpuSample::*> kGpuFields[] = {
    {schema::gpu::kUtil, &GpuSample::util},
    {schema::gpu::kMemUtil, &GpuSample::mem_util},
    {schema::gpu::kMemUsedBytes, &GpuSample::mem_used_bytes},
    {schema::gpu::kMemTotalBytes, &GpuSample::mem_total_bytes},
    {schema::gpu::kPowerW, &GpuSample::power_w},
    {schema::gpu::kPowerLimitW, &GpuSample::power_limit_w},
    {schema::gpu::kTempC, &GpuSample::temp_c},
    {schema::gpu::kSmClockMhz, &GpuSample::sm_clock_mhz},
    {schema::gpu::kSmActive, &GpuSample::sm_active},
    {schema::gpu::kSmOccupancy, &GpuSample::sm_occupancy},
    {schema::gpu::kTensorActive, &GpuSample::tensor_active},
    {schema::gpu::kDramActive, &GpuSample::dram_active}};
}  // namespace

void SampleBuilder::BuildGpu(Metrics* out) {
  if (gpu_ == nullptr) return;
  out->emplace_back(schema::kGpuCount, static_cast<double>(gpu_->device_count()));
  if (gpu_->device_count() == 0) return;
  gpu_->Sample(&gpu_samples_);
  std::unordered_set<unsigned> tree;
  if (process_.have_prev) {
    for (const ProcStat& p : process_.prev.procs) tree.insert(static_cast<unsigned>(p.pid));
  }
  for (size_t i = 0; i < gpu_samples_.size(); ++i) {
    const GpuSample& s = gpu_samples_[i];
    const std::string base = schema::GpuMetric(static_cast<int64_t>(i), "");  // "gpu<i>."
    auto add = [&](const char* field, double v) {
      if (!std::isnan(v)) out->emplace_back(base + field, v);
    };
    for (const auto& [field, member] : kGpuFields) add(field, s.*member);
    if (s.has_procs) {
      double tree_bytes = 0;
      for (const auto& [pid, bytes] : s.procs) {
        if (tree.count(pid)) tree_bytes += static_cast<double>(bytes);
      }
      add(schema::gpu::kProcMemBytes, tree_bytes);
      add(schema::gpu::kProcCount, static_cast<double>(s.procs.size()));
    }
  }
}

}  // namespace trainscope::sysmon
