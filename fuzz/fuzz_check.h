// The invariant check of the fuzz targets: a broken invariant prints what broke and aborts,
// which libFuzzer (and fuzz/replay_main.cc in the ctest replays) report as a crash, with the
// input saved. `file` defaults to the calling target's source file.
#pragma once

#include <cstdio>
#include <cstdlib>

namespace trainscope::fuzz {

inline void Check(bool ok, const char* what, const char* file = __builtin_FILE()) {
  if (!ok) {
    std::fprintf(stderr, "%s: invariant broken: %s\n", file, what);
    std::abort();
  }
}

}  // namespace trainscope::fuzz
