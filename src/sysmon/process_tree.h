// process_tree.h — the process tree rooted at one pid (the training process, its data-loader
// workers and their children), read from <root>/proc/<pid>/stat.
//
// Finding the tree needs every process's parent, so a full scan lists /proc and reads the
// stat file of every process it has not seen before (the parent of a process it has seen is
// remembered; every kVerifyEvery-th full scan reads them all again, which catches reparenting
// and pids reused between scans). Between full scans (every `rescan_every` samples) only the
// known members' stat files are read, plus their main thread's /proc/<pid>/task/<pid>/children
// list, so children forked by a member's main thread (DataLoader workers) appear at once and
// others at the next full scan. Members' stat files are read on every sample whatever the scan.
// Processes are matched across snapshots by (pid, start time) so a reused pid is not mistaken
// for the old process.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "sysmon/proc_file.h"

namespace trainscope::sysmon {

struct ProcStat {
  int pid = 0;
  int ppid = 0;
  std::string name;          // comm, up to 15 characters, may contain spaces and ')'
  uint64_t cpu_ticks = 0;    // utime + stime, USER_HZ ticks
  uint64_t start_ticks = 0;  // starttime since boot
  uint64_t rss_pages = 0;
};

// Parses one /proc/<pid>/stat line. False if malformed or truncated.
bool ParsePidStat(std::string_view text, ProcStat* out);

struct ProcessSnapshot {
  std::vector<ProcStat> procs;  // the tree, root first, then in breadth-first order
};

class ProcessTreeCollector {
 public:
  // `root` is "/" or a fixture directory; `root_pid` the tree's root.
  ProcessTreeCollector(std::string root, int root_pid, int rescan_every);

  // Fills *out. False if the root process's stat file is missing or malformed (the tree is
  // empty then). Stat files of other processes that vanish mid-scan are skipped silently;
  // malformed ones are counted in malformed().
  bool Collect(ProcessSnapshot* out);
  uint64_t malformed() const { return malformed_; }
  // stat files read by full scans so far (tests and benchmarks).
  uint64_t scan_reads() const { return scan_reads_; }

  static constexpr int kVerifyEvery = 6;

 private:
  bool FullScan(ProcessSnapshot* out);
  bool ReadKnown(ProcessSnapshot* out);
  // False if gone or malformed. The tree's members are read through files_ (descriptors kept
  // open); a full scan's reads of every other process are not.
  bool ReadPid(int pid, ProcStat* out, KernelFileCache* cache);

  std::string root_;
  std::string proc_dir_;
  int root_pid_;
  int rescan_every_;
  int since_scan_ = 0;
  std::vector<int> members_;
  std::string buf_;
  KernelFileCache files_;
  // Every process seen by a full scan: its parent, and the scan that last listed it.
  struct Known {
    int ppid;
    uint64_t scan;
  };
  std::unordered_map<int, Known> known_;
  uint64_t scans_ = 0;
  std::vector<int> pids_;      // scratch: the pids a full scan lists
  std::vector<ProcStat> all_;  // scratch: stat files read by a full scan
  uint64_t malformed_ = 0;
  uint64_t scan_reads_ = 0;
};

struct ProcRate {
  int pid = 0;
  double cpu_pct = 0;  // of one core: 100 = one core fully busy
  double rss_bytes = 0;
};
struct ProcessRates {
  std::vector<ProcRate> procs;  // processes of `b`; cpu_pct 0 for ones new since `a`
  double tree_cpu_pct = 0;
  double tree_rss_bytes = 0;
};
ProcessRates ComputeProcessRates(const ProcessSnapshot& a, const ProcessSnapshot& b, double seconds,
                                 double ticks_per_s, double page_size);

}  // namespace trainscope::sysmon
