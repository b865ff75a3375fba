// cgroup.h — the CPU and memory limits and usage of the cgroup a process runs in, cgroup v1 or
// v2 (and the "hybrid" layout with v2 mounted at /sys/fs/cgroup/unified).
//
// The process's cgroup comes from <root>/proc/<pid>/cgroup. For each resource the v2 files
// (cpu.max, memory.max, memory.current, cpu.stat) are preferred when the process's v2 directory
// has them, else the v1 controller directories (cpu/cpu.cfs_quota_us + cpu.cfs_period_us,
// memory/memory.limit_in_bytes + memory.usage_in_bytes, cpuacct/cpuacct.usage, cpu/cpu.stat).
// A limit set on an ancestor applies too, so the effective limit is the smallest found from the
// process's directory up to the mount point. When the process's path does not exist under the
// mount (a container without a cgroup namespace sees the host path but has its own cgroup
// mounted at the root) the mount point itself is used.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "sysmon/proc_file.h"

namespace trainscope::sysmon {

// One line of /proc/<pid>/cgroup: "4:memory:/docker/abc" or "0::/user.slice".
struct CgroupEntry {
  std::string controllers;  // "cpu,cpuacct"; "" for the v2 line
  std::string path;
};
bool ParseProcCgroup(std::string_view text, std::vector<CgroupEntry>* out);

// "max 100000" -> unlimited; "200000 100000" -> 2.0 cores.
bool ParseCpuMax(std::string_view text, bool* limited, double* cores);
// "max" -> unlimited; a number of bytes. Values >= 2^62 (v1's "no limit") are unlimited.
bool ParseMemLimit(std::string_view text, bool* limited, uint64_t* bytes);
// A single unsigned number on one line (memory.current, cpu.cfs_quota_us may be -1: see below).
bool ParseSingleU64(std::string_view text, uint64_t* out);
// The value of `key` in a "key value" per line file (cpu.stat). False if absent or malformed.
bool FindKeyedU64(std::string_view text, std::string_view key, uint64_t* out);

// Directories resolved once per process (they do not change while it runs).
struct CgroupPaths {
  int cpu_version = 0;                // 0: no cpu limit files found, 1 or 2
  std::vector<std::string> cpu_dirs;  // leaf first, up to the mount point
  int mem_version = 0;
  std::vector<std::string> mem_dirs;
  std::string cpu_usage_file;  // v2 cpu.stat (usage_usec) or v1 cpuacct.usage (ns)
  std::string cpu_stat_file;   // throttling counters: v2/v1 cpu.stat
};
// Resolves the directories for process `pid_dir` ("self" or "1234") under `root`. Returns false
// only if the process's cgroup file is unreadable or malformed.
bool ResolveCgroupPaths(const std::string& root, const std::string& pid_dir, CgroupPaths* out);

struct CgroupSnapshot {
  bool has_cpu_limit = false;
  double cpu_limit_cores = 0;
  bool has_mem_limit = false;
  uint64_t mem_limit_bytes = 0;
  bool has_mem_usage = false;
  uint64_t mem_usage_bytes = 0;
  bool has_cpu_usage = false;
  uint64_t cpu_usage_us = 0;  // cumulative CPU time of the cgroup
  bool has_throttle = false;
  uint64_t nr_periods = 0, nr_throttled = 0;
};
// Reads the files named by `paths`. Missing files are skipped; false if one that exists is
// malformed (the caller keeps its previous snapshot). `buf` is a reusable read buffer.
bool ReadCgroup(const CgroupPaths& paths, CgroupSnapshot* out, std::string* buf,
                KernelFileCache* cache = nullptr);

struct CgroupRates {
  bool has_cpu_usage = false;
  double cpu_usage_cores = 0;  // CPU seconds per second used by the whole cgroup
  bool has_throttle = false;
  double throttled_pct = 0;  // share of CFS periods in which the cgroup was throttled
};
CgroupRates ComputeCgroupRates(const CgroupSnapshot& a, const CgroupSnapshot& b, double seconds);

}  // namespace trainscope::sysmon
