// Helpers shared by the profiling rules: the decoded view of one system sample, percentiles, the
// set of GPUs a run actually uses, and SampleRule, the base of the rules that read samples.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "rules/rule_util.h"
#include "trainscope/rules.h"
#include "trainscope/schema.h"

namespace trainscope::rules {

// The parsed view of one SystemSampleRecord lives with the metric names (trainscope/schema.h).
using GpuReading = schema::GpuReading;
using SampleView = schema::SystemSampleView;
inline SampleView ParseSample(const SystemSampleRecord& r) { return schema::ParseSystemSample(r); }

// NumPy's default (linear) percentile, p in [0, 100]; NaN for an empty input.
inline double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  double pos = p / 100.0 * (v.size() - 1);
  size_t lo = static_cast<size_t>(std::floor(pos));
  size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - lo);
}
template <typename C>
inline double MeanOf(const C& c) {
  if (c.empty()) return NAN;
  double s = 0;
  for (double x : c) s += x;
  return s / c.size();
}

// Which GPUs of one node the training uses: those where the monitored process tree holds memory
// (gpu<i>.proc_mem_bytes > 0) once any GPU has shown that; otherwise those whose utilisation has
// been above 0 at least once. Unused GPUs (other users', spare ones) are never judged.
class GpuUsage {
 public:
  void Update(const SampleView& v) {
    for (const auto& [i, g] : v.gpus) {
      if (g.proc_mem > 0) by_proc_.insert(i);
      if (g.util > 0) by_util_.insert(i);
    }
  }
  bool Used(int i) const {
    return by_proc_.empty() ? by_util_.count(i) > 0 : by_proc_.count(i) > 0;
  }
  bool Any() const { return !by_proc_.empty() || !by_util_.empty(); }

 private:
  std::set<int> by_proc_, by_util_;
};

inline std::string Pct(double v) { return Fmt(v) + "%"; }
inline std::string Ms(double us) { return Fmt(us / 1000.0) + " ms"; }

// Base of the rules that read system samples. Keeps the newest step seen (to stamp evaluations),
// which GPUs each node uses, and reports "no GPU metrics" for rules that need GPUs.
class SampleRule : public Rule {
 public:
  SampleRule(std::string name, bool needs_gpu) : name_(std::move(name)), needs_gpu_(needs_gpu) {}

  void OnStep(const std::string& stream, const StepRecord& r, RuleContext& ctx) override {
    if (r.step > last_step_) {
      last_step_ = r.step;
      last_mode_ = r.mode;
    }
    OnStepRecord(stream, r, ctx);
  }

  void OnSystemSample(const std::string& stream, const SystemSampleRecord& r,
                      RuleContext& ctx) override {
    SampleView v = ParseSample(r);
    samples_++;
    if (v.HasGpuMetrics()) any_gpu_ = true;
    GpuUsage& usage = usage_[stream];
    usage.Update(v);
    if (needs_gpu_ && !any_gpu_ && samples_ == 3) NoGpu(ctx);
    OnSample(stream, v, usage, ctx);
  }

  void OnEnd(RuleContext& ctx) override {
    Finish(ctx);
    if (!needs_gpu_) return;
    if (!any_gpu_) {
      NoGpu(ctx);
      return;
    }
    bool used = false;
    for (const auto& [s, u] : usage_) used = used || u.Any();
    if (!used) {
      ctx.Warn(
          "GPUs were present but the training did not use them (0% utilisation "
          "throughout); " +
          name_ + " had nothing to check");
    }
  }

 protected:
  virtual void OnSample(const std::string& stream, const SampleView& v, const GpuUsage& usage,
                        RuleContext& ctx) = 0;
  virtual void OnStepRecord(const std::string& stream, const StepRecord& r, RuleContext& ctx) {}
  virtual void Finish(RuleContext& ctx) {}

  Evaluation EvalFor(const std::string& worker) const {
    Evaluation e;
    e.worker = worker;
    e.step = last_step_;
    e.mode = last_mode_;
    e.value = NAN;
    e.threshold = NAN;
    return e;
  }

  const std::string name_;

 private:
  void NoGpu(RuleContext& ctx) {
    ctx.Warn("no GPU metrics in this run (gpu.count is 0 or NVML is missing); " + name_ +
             " has nothing to check");
  }

  bool needs_gpu_;
  bool any_gpu_ = false;
  uint64_t samples_ = 0;
  int64_t last_step_ = -1;
  Mode last_mode_ = Mode::kTrain;
  std::map<std::string, GpuUsage> usage_;
};

// SageMaker's scan_interval_us: accepted so configs written for SageMaker parse; the rules here
// evaluate every sample as it arrives, so the value is not used.
inline ParamSpec ScanIntervalParam() {
  return P("scan_interval_us", ParamType::kInt, "60000000",
           "accepted for SageMaker compatibility; unused (rules evaluate every sample)");
}

}  // namespace trainscope::rules
