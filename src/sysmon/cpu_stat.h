// cpu_stat.h — CPU time from /proc/stat, total and per core, and utilisation between two
// snapshots. Times are in kernel ticks (USER_HZ); only their ratios are used.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace trainscope::sysmon {

struct CpuTimes {
  uint64_t user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0;
  uint64_t Total() const { return user + nice + system + idle + iowait + irq + softirq + steal; }
};

struct CpuSnapshot {
  CpuTimes total;               // the "cpu " line
  std::vector<int> core_ids;    // N of each "cpuN" line, in file order
  std::vector<CpuTimes> cores;  // parallel to core_ids
};

// Parses /proc/stat. False (and *out unspecified) if the "cpu " line is missing or malformed;
// a malformed "cpuN" line also fails the whole parse. Only complete lines are read.
bool ParseProcStat(std::string_view text, CpuSnapshot* out);

// Percentages of the ticks elapsed between two snapshots (0..100). `util` is everything but
// idle and iowait; `user` includes nice; `system` includes irq and softirq.
struct CpuUsage {
  double util = 0, user = 0, system = 0, iowait = 0, idle = 0, steal = 0;
};
struct CpuRates {
  bool valid = false;  // false when no tick elapsed
  CpuUsage total;
  std::vector<int> core_ids;  // cores present in both snapshots with ticks elapsed
  std::vector<CpuUsage> cores;
};

// Counters that go backwards (iowait can, on some kernels) count as no change.
CpuUsage ComputeCpuUsage(const CpuTimes& a, const CpuTimes& b, bool* valid);
CpuRates ComputeCpuRates(const CpuSnapshot& a, const CpuSnapshot& b);

}  // namespace trainscope::sysmon
