// diskstats.h — block device I/O from /proc/diskstats and byte rates between two snapshots.
//
// Only whole physical disks count: loop, ram, zram, device-mapper (dm-*) and md devices are
// skipped (they would count the same I/O twice or none at all), and so are partitions — a
// device whose name is another listed device's name plus digits ("sda1", "vda2") or "p" plus
// digits ("nvme0n1p1", "mmcblk0p1"). Sectors in diskstats are always 512 bytes.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace trainscope::sysmon {

struct DiskCounters {
  std::string name;
  uint64_t reads = 0, read_sectors = 0, writes = 0, write_sectors = 0, io_ms = 0;
};

struct DiskSnapshot {
  std::vector<DiskCounters> disks;  // whole disks only, in file order
};

bool ParseDiskStats(std::string_view text, DiskSnapshot* out);

// Rates over `seconds` summed over the disks present in both snapshots. busy_pct is the
// busiest disk's share of the interval with I/O in flight (io_ms delta / interval).
struct DiskRates {
  double read_bytes_per_s = 0, write_bytes_per_s = 0, read_ops_per_s = 0, write_ops_per_s = 0,
         busy_pct = 0;
};
DiskRates ComputeDiskRates(const DiskSnapshot& a, const DiskSnapshot& b, double seconds);

// Exposed for tests: true for names that are never counted (loop0, ram1, zram0, dm-3, md127).
bool IsVirtualDisk(std::string_view name);

}  // namespace trainscope::sysmon
