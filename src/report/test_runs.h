// Synthetic runs for tests, the browser test and the benchmark: deterministic RunData for a
// healthy run, a faulty one (starved GPU, NaN loss, rules fired, preemption) and a large one.
#pragma once

#include <string>

#include "trainscope/report.h"

namespace trainscope::testing {

struct SyntheticOptions {
  std::string kind = "healthy";  // "healthy", "faulty", "nogpu"
  int64_t steps = 3000;
  int64_t samples = 0;                  // system samples (0: one per 500 ms of run time)
  int64_t start_us = 1767225600000000;  // 2026-01-01T00:00:00Z
  std::string instance = "g5.2xlarge";  // recorded in config_json
};

RunData MakeSyntheticRun(const SyntheticOptions& o);

// Writes `d` as a real run directory with trainscope::Writer (+ RUN/profile files).
Status WriteRun(const RunData& d, const std::string& run_dir);

}  // namespace trainscope::testing
