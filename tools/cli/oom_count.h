// How many processes the kernel's OOM killer has killed, from the counters the kernel keeps:
// /proc/vmstat's oom_kill (the whole machine, Linux >= 4.13) plus the oom_kill of this
// process's memory cgroup: cgroup v2 memory.events, or cgroup v1 memory.oom_control (its
// "oom_kill N" line, Linux >= 4.13). `trainscope run` compares it before and after the
// training: a child that died of a SIGKILL trainscope did not send while the count went up was
// killed for memory (a container's or a job's memory limit, or the machine's).
#pragma once

#include <cstdint>
#include <string>

namespace trainscope::cli {

struct OomCounters {
  int64_t vmstat = -1;  // /proc/vmstat oom_kill, -1 when unreadable
  int64_t cgroup = -1;  // the memory cgroup's oom_kill, -1 when unreadable
  std::string cgroup_file;  // the file it came from ("" when none)
  // The sum of the readable counters; -1 when neither can be read.
  int64_t total() const;
};

// `proc` is the /proc and `sys_cgroup` the cgroup mount to read (tests pass fakes).
OomCounters ReadOomCounters(const std::string& proc = "/proc",
                            const std::string& sys_cgroup = "/sys/fs/cgroup");

// ReadOomCounters().total().
int64_t OomKillCount();

}  // namespace trainscope::cli
