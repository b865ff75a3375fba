// live_writer — a stand-in training process for the dashboard, Prometheus and export tests.
// Writes a run with trainscope::Writer: per step a StepRecord with phases, the training loss,
// an eval loss every 10 steps, a system sample (cpu/mem/gpu0), a rule in progress that reports
// IssuesFound at --fault-step, and optionally tensor summaries with histograms of known values
// (dumped as raw float32 files so tests can recompute them with NumPy). Between steps it checks
// trainscope::StopRequested and exits 0 when a stop was requested (printing "stopped: REASON").
//
//   live_writer RUN [--steps N (0: until stopped)] [--step-ms MS] [--fault-step K]
//                   [--tensor-every K --buckets B --dump-dir DIR] [--max-seconds S] [--name NAME]
// Exit codes: 0 finished or stopped, 2 usage, 3 --max-seconds reached, 1 error.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "trainscope/run.h"
#include "trainscope/writer.h"

namespace ts = trainscope;

namespace {

// NumPy np.histogram semantics over [lo, hi]: equal buckets, the last one closed.
ts::TensorStats Stats(const std::vector<float>& v, int buckets) {
  ts::TensorStats s;
  s.count = v.size();
  double lo = INFINITY, hi = -INFINITY, sum = 0, sq = 0, l1 = 0;
  for (float f : v) {
    double x = f;
    lo = std::min(lo, x);
    hi = std::max(hi, x);
    sum += x;
    sq += x * x;
    l1 += std::fabs(x);
    s.zeros += x == 0;
    s.negatives += x < 0;
    s.positives += x > 0;
  }
  const double n = static_cast<double>(v.size());
  s.min = lo;
  s.max = hi;
  s.mean = sum / n;
  double var = 0;
  for (float f : v) var += (f - s.mean) * (f - s.mean);
  s.var = var / n;
  s.l1 = l1;
  s.l2 = std::sqrt(sq);
  s.abs_mean = l1 / n;
  if (buckets > 0) {
    s.histogram.lo = lo;
    s.histogram.hi = hi;
    s.histogram.counts.assign(static_cast<size_t>(buckets), 0);
    const double w = (hi - lo) / buckets;
    for (float f : v) {
      int i = w > 0 ? static_cast<int>(std::floor((f - lo) / w)) : 0;
      if (i >= buckets) i = buckets - 1;
      if (i < 0) i = 0;
      // Correct rounding at the edges the way NumPy does (edges are lo + i*w).
      if (i > 0 && f < lo + i * w) --i;
      if (i + 1 < buckets && f >= lo + (i + 1) * w) ++i;
      s.histogram.counts[static_cast<size_t>(i)]++;
    }
  }
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  std::string run, dump_dir, name = "live";
  long steps = 0, step_ms = 100, fault_step = -1, tensor_every = 0, buckets = 20;
  double max_seconds = 300;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--steps")
      steps = std::atol(next().c_str());
    else if (a == "--step-ms")
      step_ms = std::atol(next().c_str());
    else if (a == "--fault-step")
      fault_step = std::atol(next().c_str());
    else if (a == "--tensor-every")
      tensor_every = std::atol(next().c_str());
    else if (a == "--buckets")
      buckets = std::atol(next().c_str());
    else if (a == "--dump-dir")
      dump_dir = next();
    else if (a == "--max-seconds")
      max_seconds = std::atof(next().c_str());
    else if (a == "--name")
      name = next();
    else if (!a.empty() && a[0] != '-' && run.empty())
      run = a;
    else {
      std::cerr << "live_writer: unknown argument " << a << "\n";
      return 2;
    }
  }
  if (run.empty()) {
    std::cerr << "usage: live_writer RUN [--steps N] [--step-ms MS] [--fault-step K] "
                 "[--tensor-every K --buckets B --dump-dir DIR] [--max-seconds S]\n";
    return 2;
  }
  ts::RunManifest m;
  m.name = name;
  m.framework = "live_writer";
  m.command = {"live_writer", run};
  if (auto st = ts::CreateOrOpenRun(run, &m); !st.ok()) {
    std::cerr << "live_writer: " << st.ToString() << "\n";
    return 1;
  }
  ts::WriterOptions o;
  o.run_dir = run;
  o.stream = "worker-0";
  o.flush_interval_ms = 20;
  o.stats_interval_ms = 500;
  auto w = ts::Writer::Open(o);
  if (!w.ok()) {
    std::cerr << "live_writer: " << w.status().ToString() << "\n";
    return 1;
  }
  ts::Writer& writer = **w;
  const auto t0 = std::chrono::steady_clock::now();
  writer.AddEvent({"run_start", ts::NowMicros(), "{}"});
  ts::RuleEventRecord rule;
  rule.rule = "loss_not_decreasing";
  rule.status = ts::RuleStatus::kInProgress;
  rule.worker = "worker-0";
  rule.value = NAN;
  rule.threshold = NAN;
  rule.message = "watching losses/loss";
  rule.wall_us = ts::NowMicros();
  writer.AddRuleEvent(rule);
  writer.Flush();
  std::cout << "live_writer: writing " << run << std::endl;

  uint64_t lcg = 12345;
  auto uniform = [&]() {
    lcg = lcg * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<double>(lcg >> 11) / 9007199254740992.0;
  };
  int exit_code = 0;
  for (long step = 0; steps == 0 || step < steps; ++step) {
    std::string reason;
    if (ts::StopRequested(run, &reason)) {
      writer.AddEvent(
          {"stop_honoured", ts::NowMicros(), "{\"step\":" + std::to_string(step) + "}"});
      std::cout << "stopped: " << reason << std::endl;
      break;
    }
    double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (elapsed > max_seconds) {
      std::cerr << "live_writer: --max-seconds reached\n";
      exit_code = 3;
      break;
    }
    const int64_t start = ts::NowMicros();
    if (step_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(step_ms));
    const int64_t end = std::max(ts::NowMicros(), start + 1000);
    const int64_t dur = end - start;
    ts::StepRecord st;
    st.step = step;
    st.mode_step = step;
    st.start_us = start;
    st.end_us = end;
    st.data_wait_us = dur / 10;
    st.forward_us = dur * 3 / 10;
    st.backward_us = dur * 4 / 10;
    st.optimizer_us = dur / 10;
    writer.AddStep(st);
    const double loss = 2.0 / (1.0 + 0.05 * static_cast<double>(step)) + 0.05 * uniform();
    writer.AddScalar({"losses/loss", step, ts::Mode::kTrain, step, loss, end});
    if (step % 10 == 9) {
      writer.AddScalar({"losses/loss", step, ts::Mode::kEval, step / 10, loss * 1.1, end});
    }
    ts::SystemSampleRecord s;
    s.wall_us = end;
    s.metrics = {{"cpu.util", 40 + 20 * uniform()},
                 {"mem.used_bytes", 4e9 + 1e8 * uniform()},
                 {"gpu.count", 1},
                 {"gpu0.util", 70 + 30 * uniform()},
                 {"gpu0.mem_used_bytes", 8e9 + 1e8 * uniform()},
                 {"cpu.core0.user", 30}};
    writer.AddSystemSample(s);
    if (tensor_every > 0 && step % tensor_every == 0) {
      std::vector<float> v(1000);
      for (auto& x : v) x = static_cast<float>((uniform() + uniform() + uniform() - 1.5) * 2.0);
      ts::SummaryRecord sum;
      sum.name = "weights/fc1.weight";
      sum.step = step;
      sum.mode_step = step;
      sum.shape = {10, 100};
      sum.stats = Stats(v, static_cast<int>(buckets));
      sum.wall_us = end;
      writer.AddSummary(sum);
      if (!dump_dir.empty()) {
        std::ofstream f(dump_dir + "/weights-" + std::to_string(step) + ".f32", std::ios::binary);
        f.write(reinterpret_cast<const char*>(v.data()),
                static_cast<std::streamsize>(v.size() * 4));
      }
    }
    if (step == fault_step) {
      rule.status = ts::RuleStatus::kIssuesFound;
      rule.step = step;
      rule.value = loss;
      rule.threshold = 0.1;
      rule.firing = 1;
      rule.tensors = {"losses/loss"};
      rule.message = "loss did not decrease by 10% over the last 10 steps (injected fault)";
      rule.wall_us = end;
      writer.AddRuleEvent(rule);
    }
  }
  writer.AddEvent({"run_end", ts::NowMicros(), "{}"});
  auto st = writer.Close();
  if (!st.ok()) {
    std::cerr << "live_writer: " << st.ToString() << "\n";
    return 1;
  }
  return exit_code;
}
