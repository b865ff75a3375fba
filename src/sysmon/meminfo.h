// meminfo.h — system memory from /proc/meminfo (values in bytes).
#pragma once

#include <cstdint>
#include <string_view>

namespace trainscope::sysmon {

struct MemInfo {
  uint64_t total = 0, free = 0, available = 0, buffers = 0, cached = 0, swap_total = 0,
           swap_free = 0;
  // total - available: memory that cannot be reclaimed without swapping. (psutil and `free`
  // report total - free - buffers - cached instead; see docs/metrics.md.)
  uint64_t Used() const { return total > available ? total - available : 0; }
};

// Parses /proc/meminfo ("Key:   123 kB" lines). MemTotal and MemFree are required; when
// MemAvailable is absent (kernels < 3.14) it is estimated as free + buffers + cached.
bool ParseMemInfo(std::string_view text, MemInfo* out);

}  // namespace trainscope::sysmon
