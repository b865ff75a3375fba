#include "sysmon/diskstats.h"

#include <algorithm>

#include "sysmon/proc_file.h"

namespace trainscope::sysmon {
namespace {

bool StartsWith(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

bool AllDigits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// "sda1" of "sda", "nvme0n1p2" of "nvme0n1".
bool IsPartitionOf(std::string_view part, std::string_view disk) {
  if (part.size() <= disk.size() || !StartsWith(part, disk)) return false;
  std::string_view rest = part.substr(disk.size());
  if (rest.front() == 'p') rest.remove_prefix(1);
  return AllDigits(rest);
}

uint64_t Delta(uint64_t a, uint64_t b) { return b > a ? b - a : 0; }

}  // namespace

bool IsVirtualDisk(std::string_view name) {
  return StartsWith(name, "loop") || StartsWith(name, "ram") || StartsWith(name, "zram") ||
         StartsWith(name, "dm-") || StartsWith(name, "md");
}

bool ParseDiskStats(std::string_view text, DiskSnapshot* out) {
  if (!Terminated(text)) return false;
  out->disks.clear();
  std::vector<DiskCounters> all;
  text = CompleteLines(text);
  std::string_view line;
  while (NextLine(&text, &line)) {
    std::string_view tok[14];
    size_t n = 0;
    while (n < 14 && NextToken(&line, &tok[n])) ++n;
    if (n == 0) continue;
    if (n < 14) return false;  // major minor name + at least 11 counters
    uint64_t v[11];
    for (size_t i = 0; i < 11; ++i) {
      if (!ParseU64(tok[3 + i], &v[i])) return false;
    }
    DiskCounters d;
    d.name = std::string(tok[2]);
    d.reads = v[0];
    d.read_sectors = v[2];
    d.writes = v[4];
    d.write_sectors = v[6];
    d.io_ms = v[9];
    all.push_back(std::move(d));
  }
  for (const DiskCounters& d : all) {
    if (IsVirtualDisk(d.name)) continue;
    bool partition = std::any_of(all.begin(), all.end(), [&](const DiskCounters& o) {
      return IsPartitionOf(d.name, o.name);
    });
    if (!partition) out->disks.push_back(d);
  }
  return true;
}

DiskRates ComputeDiskRates(const DiskSnapshot& a, const DiskSnapshot& b, double seconds) {
  DiskRates r;
  if (seconds <= 0) return r;
  for (const DiskCounters& d : b.disks) {
    auto it = std::find_if(a.disks.begin(), a.disks.end(),
                           [&](const DiskCounters& o) { return o.name == d.name; });
    if (it == a.disks.end()) continue;
    r.read_bytes_per_s += 512.0 * Delta(it->read_sectors, d.read_sectors) / seconds;
    r.write_bytes_per_s += 512.0 * Delta(it->write_sectors, d.write_sectors) / seconds;
    r.read_ops_per_s += Delta(it->reads, d.reads) / seconds;
    r.write_ops_per_s += Delta(it->writes, d.writes) / seconds;
    double busy = std::min(100.0, 100.0 * Delta(it->io_ms, d.io_ms) / (1000.0 * seconds));
    r.busy_pct = std::max(r.busy_pct, busy);
  }
  return r;
}

}  // namespace trainscope::sysmon
