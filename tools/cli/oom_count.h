// How many processes the kernel's OOM killer has killed: /proc/vmstat's oom_kill (the whole
// machine, Linux >= 4.13) plus the oom_kill of this process's cgroup v2 memory.events (a
// container's limit). `trainscope run` compares it before and after the training: a child that
// died of a SIGKILL trainscope did not send while the count went up was killed for memory.
#pragma once

#include <cstdint>

namespace trainscope::cli {

// -1 when neither counter can be read.
int64_t OomKillCount();

}  // namespace trainscope::cli
