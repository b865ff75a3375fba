// Synthetic runs for tests, the browser test and the benchmark: deterministic RunData for a
// healthy run, a faulty one (starved GPU, NaN loss, rules fired, preemption) and a large one.
#pragma once

#include <string>
#include <utility>
#include <vector>

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

// Turns worker-0's steps into `ranks` worker streams, as DDP ranks in lockstep: rank 1 spends
// 5 ms more per step in its data loader and the others wait that long in the all-reduce (the
// dist/comm_wait_us scalar of each rank). No-op for ranks < 2.
void MakeRanks(RunData* d, int ranks);
// Rank r's steps and dist/comm_wait_us values from worker-0's `base`, as MakeRanks makes them
// (one rank at a time: a generator of thousands of ranks holds one).
void MakeRank(const std::vector<StepRecord>& base, int r, std::vector<StepRecord>* steps,
              std::vector<std::pair<int64_t, double>>* waits);
// One rank's stream as WriteRun writes it: its steps, then its waits, with one Writer.
Status WriteRankStream(const std::string& run_dir, const std::string& stream,
                       const std::vector<StepRecord>& steps,
                       const std::vector<std::pair<int64_t, double>>& waits);
// After WriteRun: every rank but 0 records its own loss (worker-0's losses/loss, 1% higher per
// rank: each rank sees its own batches), in a segment of its own.
// Ranks [max(1, first), ranks).
Status WriteRankLosses(const RunData& d, const std::string& run_dir, int ranks, int first = 1);

// Writes `d` as a real run directory with trainscope::Writer (+ RUN/profile files).
Status WriteRun(const RunData& d, const std::string& run_dir);

}  // namespace trainscope::testing
