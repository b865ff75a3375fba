// sysmon_bench — CPU time per system-monitor sample on the real /proc, monitoring a 5-process
// tree (this process and 4 forked children that sleep). Compare with
// bench/sysmon_vs_psutil.py, which collects the same metrics with psutil. Target: < 200 µs.
#include <benchmark/benchmark.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <vector>

#include "trainscope/sysmon.h"

namespace {

class ChildTree {
 public:
  explicit ChildTree(int n) {
    for (int i = 0; i < n; ++i) {
      pid_t pid = fork();
      if (pid == 0) {
        pause();
        _exit(0);
      }
      if (pid > 0) pids_.push_back(pid);
    }
  }
  ~ChildTree() {
    for (pid_t p : pids_) kill(p, SIGTERM);
    for (pid_t p : pids_) waitpid(p, nullptr, 0);
  }

 private:
  std::vector<pid_t> pids_;
};

void Run(benchmark::State& state, trainscope::SystemSamplerOptions o) {
  ChildTree tree(4);
  size_t metrics = 0;
  auto r = trainscope::SystemSampler::Create(
      o, [&](trainscope::SystemSampleRecord rec) { metrics = rec.metrics.size(); });
  if (!r.ok()) {
    state.SkipWithError(r.status().ToString().c_str());
    return;
  }
  auto& s = r.value();
  int64_t t = 0;
  s->SampleOnce(t, t);  // first sample: no rates yet
  for (auto _ : state) {
    t += 500000;
    s->SampleOnce(t, t);
  }
  state.counters["metrics"] = static_cast<double>(metrics);
  state.counters["errors"] = static_cast<double>(s->stats().errors);
}

void BM_SampleAll(benchmark::State& state) {
  trainscope::SystemSamplerOptions o;  // defaults: full /proc scan every 10 samples
  Run(state, o);  // GPU on: without NVML this is the dlopen failure, once, at Create
}
BENCHMARK(BM_SampleAll);

void BM_SampleNoPerProcess(benchmark::State& state) {
  trainscope::SystemSamplerOptions o;
  o.per_process = false;
  o.per_core = false;
  Run(state, o);
}
BENCHMARK(BM_SampleNoPerProcess);

void BM_SampleFullScanEverySample(benchmark::State& state) {
  trainscope::SystemSamplerOptions o;
  o.process_rescan_every = 1;
  Run(state, o);
}
BENCHMARK(BM_SampleFullScanEverySample);

}  // namespace

BENCHMARK_MAIN();
