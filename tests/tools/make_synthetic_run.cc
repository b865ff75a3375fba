// make_synthetic_run — writes a synthetic run directory with trainscope::Writer, for the browser
// test and the report benchmark.
//   make_synthetic_run OUT_DIR [--kind healthy|faulty|nogpu] [--steps N] [--samples N]
//                              [--instance TYPE] [--ranks N]
// --ranks N (distributed runs, docs/distributed.md): worker-0's steps for N worker streams, as
// DDP ranks in lockstep: rank 1 spends 5 ms more per step in its data loader and the others
// wait that long in the all-reduce (the dist/comm_wait_us scalar of each rank); every rank
// records its own loss (worker-0's, 1% higher per rank: each rank sees its own batches).
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "report/test_runs.h"

int main(int argc, char** argv) {
  trainscope::testing::SyntheticOptions o;
  std::string out;
  int ranks = 1;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--kind")
      o.kind = next();
    else if (a == "--steps")
      o.steps = std::atoll(next().c_str());
    else if (a == "--samples")
      o.samples = std::atoll(next().c_str());
    else if (a == "--instance")
      o.instance = next();
    else if (a == "--ranks")
      ranks = std::atoi(next().c_str());
    else if (!a.empty() && a[0] != '-')
      out = a;
    else {
      std::cerr << "unknown option " << a << "\n";
      return 2;
    }
  }
  if (out.empty() || o.steps < 10) {
    std::cerr << "usage: make_synthetic_run OUT_DIR [--kind healthy|faulty|nogpu] [--steps N>=10]"
                 " [--samples N] [--instance TYPE]\n";
    return 2;
  }
  if (ranks < 1 || ranks > 100000) {
    std::cerr << "--ranks must be in [1, 100000]\n";
    return 2;
  }
  namespace t = trainscope::testing;
  auto d = t::MakeSyntheticRun(o);
  // Rank 0 with the run (WriteRun), then one rank at a time (the same streams MakeRanks and
  // WriteRun would write, in a generator that holds one rank's records, not all of them).
  const std::vector<trainscope::StepRecord> base = d.steps["worker-0"];
  if (ranks > 1) t::MakeRank(base, 0, &d.steps["worker-0"], &d.comm_wait_us["worker-0"]);
  d.manifest.name = out.substr(out.find_last_of('/') + 1);
  d.manifest.id.clear();  // a fresh id per directory (history keys on it)
  auto fail = [](const trainscope::Status& st) {
    std::cerr << "make_synthetic_run: " << st.ToString() << "\n";
    return 1;
  };
  auto st = t::WriteRun(d, out);
  if (!st.ok()) return fail(st);
  std::vector<trainscope::StepRecord> steps;
  std::vector<std::pair<int64_t, double>> waits;
  for (int r = 1; r < ranks; ++r) {
    t::MakeRank(base, r, &steps, &waits);
    st = t::WriteRankStream(out, "worker-" + std::to_string(r), steps, waits);
    if (st.ok()) st = t::WriteRankLosses(d, out, r + 1, r);
    if (!st.ok()) return fail(st);
  }
  std::cout << out << "\n";
  return 0;
}
