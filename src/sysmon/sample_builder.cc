#include "sysmon/sample_builder.h"

#include <unistd.h>

#include <cmath>
#include <unordered_set>

#include "sysmon/proc_file.h"

namespace trainscope::sysmon {
namespace {

double Seconds(int64_t a_us, int64_t b_us) { return (b_us - a_us) / 1e6; }

std::string Indexed(const char* prefix, int64_t i, const char* suffix) {
  std::string s(prefix);
  s += std::to_string(i);
  s += suffix;
  return s;
}

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
  for (const char* r : {"cpu", "memory", "io"}) {
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
        m.emplace_back("cpu.util", r.total.util);
        m.emplace_back("cpu.user", r.total.user);
        m.emplace_back("cpu.system", r.total.system);
        m.emplace_back("cpu.iowait", r.total.iowait);
        m.emplace_back("cpu.idle", r.total.idle);
        m.emplace_back("cpu.steal", r.total.steal);
        if (options_.per_core) {
          for (size_t i = 0; i < r.core_ids.size(); ++i) {
            const int id = r.core_ids[i];
            m.emplace_back(Indexed("cpu.core", id, ".util"), r.cores[i].util);
            if (options_.per_core_detail) {
              m.emplace_back(Indexed("cpu.core", id, ".user"), r.cores[i].user);
              m.emplace_back(Indexed("cpu.core", id, ".system"), r.cores[i].system);
              m.emplace_back(Indexed("cpu.core", id, ".iowait"), r.cores[i].iowait);
            }
          }
        }
      }
    }
    std::swap(cpu_.prev, cpu_scratch_);
    cpu_.have_prev = true;
    // cpu.count is a gauge of the latest good snapshot.
    if (!cpu_.last.empty() && cpu_.last.back().first == "cpu.count") cpu_.last.pop_back();
    cpu_.last.emplace_back("cpu.count", static_cast<double>(cpu_.prev.cores.size()));
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
    m.emplace_back("mem.total_bytes", static_cast<double>(mi.total));
    m.emplace_back("mem.used_bytes", static_cast<double>(mi.Used()));
    m.emplace_back("mem.available_bytes", static_cast<double>(mi.available));
    m.emplace_back("mem.free_bytes", static_cast<double>(mi.free));
    m.emplace_back("mem.util", mi.total ? 100.0 * mi.Used() / mi.total : 0.0);
    m.emplace_back(
        "mem.swap_used_bytes",
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
      m.emplace_back("disk.read_bytes_per_s", r.read_bytes_per_s);
      m.emplace_back("disk.write_bytes_per_s", r.write_bytes_per_s);
      m.emplace_back("disk.read_ops_per_s", r.read_ops_per_s);
      m.emplace_back("disk.write_ops_per_s", r.write_ops_per_s);
      m.emplace_back("disk.busy_pct", r.busy_pct);
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
      m.emplace_back("net.rx_bytes_per_s", r.rx_bytes_per_s);
      m.emplace_back("net.tx_bytes_per_s", r.tx_bytes_per_s);
      m.emplace_back("net.rx_packets_per_s", r.rx_packets_per_s);
      m.emplace_back("net.tx_packets_per_s", r.tx_packets_per_s);
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
      const std::string base = "psi." + p.name;
      m.emplace_back(base + ".some_avg10", snap.some.avg10);
      if (snap.full.present) m.emplace_back(base + ".full_avg10", snap.full.avg10);
      if (p.state.have_prev) {
        const double s = Seconds(p.state.prev_us, now_us);
        m.emplace_back(base + ".some_stall_pct", StallPercent(p.state.prev.some, snap.some, s));
        if (snap.full.present && p.state.prev.full.present) {
          m.emplace_back(base + ".full_stall_pct", StallPercent(p.state.prev.full, snap.full, s));
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
    if (snap.has_cpu_limit) m.emplace_back("cgroup.cpu_limit_cores", snap.cpu_limit_cores);
    if (snap.has_mem_limit) {
      m.emplace_back("cgroup.mem_limit_bytes", static_cast<double>(snap.mem_limit_bytes));
    }
    if (snap.has_mem_usage) {
      m.emplace_back("cgroup.mem_used_bytes", static_cast<double>(snap.mem_usage_bytes));
    }
    if (cgroup_.have_prev) {
      CgroupRates r = ComputeCgroupRates(cgroup_.prev, snap, Seconds(cgroup_.prev_us, now_us));
      if (r.has_cpu_usage) m.emplace_back("cgroup.cpu_usage_cores", r.cpu_usage_cores);
      if (r.has_throttle) m.emplace_back("cgroup.cpu_throttled_pct", r.throttled_pct);
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
    m.emplace_back("proc.count", static_cast<double>(snap.procs.size()));
    const bool have_prev = process_.have_prev;
    ProcessRates r =
        ComputeProcessRates(have_prev ? process_.prev : ProcessSnapshot(), snap,
                            Seconds(process_.prev_us, now_us), ticks_per_s_, page_size_);
    if (have_prev) m.emplace_back("proc.tree_cpu_util", r.tree_cpu_pct);
    m.emplace_back("proc.tree_rss_bytes", r.tree_rss_bytes);
    if (options_.per_process) {
      for (const ProcRate& p : r.procs) {
        if (have_prev) m.emplace_back(Indexed("proc.", p.pid, ".cpu_util"), p.cpu_pct);
        m.emplace_back(Indexed("proc.", p.pid, ".rss_bytes"), p.rss_bytes);
      }
    }
    process_.prev = std::move(snap);
    process_.prev_us = now_us;
    process_.have_prev = true;
  }
  out->insert(out->end(), process_.last.begin(), process_.last.end());
}

void SampleBuilder::BuildGpu(Metrics* out) {
  if (gpu_ == nullptr) return;
  out->emplace_back("gpu.count", static_cast<double>(gpu_->device_count()));
  if (gpu_->device_count() == 0) return;
  gpu_->Sample(&gpu_samples_);
  std::unordered_set<unsigned> tree;
  if (process_.have_prev) {
    for (const ProcStat& p : process_.prev.procs) tree.insert(static_cast<unsigned>(p.pid));
  }
  for (size_t i = 0; i < gpu_samples_.size(); ++i) {
    const GpuSample& s = gpu_samples_[i];
    const std::string base = Indexed("gpu", static_cast<int64_t>(i), ".");
    auto add = [&](const char* name, double v) {
      if (!std::isnan(v)) out->emplace_back(base + name, v);
    };
    add("util", s.util);
    add("mem_util", s.mem_util);
    add("mem_used_bytes", s.mem_used_bytes);
    add("mem_total_bytes", s.mem_total_bytes);
    add("power_w", s.power_w);
    add("power_limit_w", s.power_limit_w);
    add("temp_c", s.temp_c);
    add("sm_clock_mhz", s.sm_clock_mhz);
    add("sm_active", s.sm_active);
    add("sm_occupancy", s.sm_occupancy);
    add("tensor_active", s.tensor_active);
    add("dram_active", s.dram_active);
    if (s.has_procs) {
      double tree_bytes = 0;
      for (const auto& [pid, bytes] : s.procs) {
        if (tree.count(pid)) tree_bytes += static_cast<double>(bytes);
      }
      add("proc_mem_bytes", tree_bytes);
      add("proc_count", static_cast<double>(s.procs.size()));
    }
  }
}

}  // namespace trainscope::sysmon
