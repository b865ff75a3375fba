// load_balancing (SageMaker LoadBalancing): compares the utilisation histograms (50 bins of 2 %)
// of every pair of used GPUs, across nodes too, with the Jensen-Shannon distance; fires when one
// pair is farther apart than `threshold` once each GPU has `patience` samples. Also compares
// workers: the median TRAIN step time of the last `window` steps of each worker stream, firing
// when the slowest is more than `worker_threshold` (relative) above the fastest.
#include <array>
#include <deque>
#include <map>

#include "rules/advice.h"
#include "rules/profiling/bottleneck.h"
#include "rules/profiling/profiling.h"

namespace trainscope::rules {
namespace {

constexpr int kBins = 50;

double JensenShannon(const std::array<double, kBins>& p, const std::array<double, kBins>& q) {
  double kl_p = 0, kl_q = 0;
  for (int b = 0; b < kBins; ++b) {
    double m = (p[b] + q[b]) / 2;
    if (p[b] > 0) kl_p += p[b] * std::log(p[b] / m);
    if (q[b] > 0) kl_q += q[b] * std::log(q[b] / m);
  }
  return std::sqrt(std::max(0.0, (kl_p + kl_q) / 2));
}

class LoadBalancing : public SampleRule {
 public:
  explicit LoadBalancing(const RuleParams& p)
      : SampleRule("load_balancing", false),
        threshold_(p.Double("threshold")),
        patience_(p.Int("patience")),
        worker_threshold_(p.Double("worker_threshold")),
        window_(static_cast<size_t>(p.Int("window"))) {}

 protected:
  void OnSample(const std::string& stream, const SampleView& v, const GpuUsage& usage,
                RuleContext& ctx) override {
    bool any = false;
    for (const auto& [i, g] : v.gpus) {
      if (!usage.Used(i) || !std::isfinite(g.util)) continue;
      Gpu& h = gpus_[stream + "/gpu" + std::to_string(i)];
      int bin = std::clamp(static_cast<int>(g.util / 2), 0, kBins - 1);
      h.counts[bin]++;
      h.n++;
      h.sum += g.util;
      any = true;
    }
    if (!any || gpus_.size() < 2) return;
    for (const auto& [name, h] : gpus_) {
      if (h.n < patience_) return;
    }
    Evaluation e = EvalFor("gpus");
    e.threshold = threshold_;
    e.value = -1;
    std::string a, b;
    for (auto x = gpus_.begin(); x != gpus_.end(); ++x) {
      for (auto y = std::next(x); y != gpus_.end(); ++y) {
        double d = JensenShannon(Normalised(x->second), Normalised(y->second));
        if (d > e.value) {
          e.value = d;
          a = x->first;
          b = y->first;
        }
      }
    }
    e.violated = e.value > threshold_;
    if (e.violated) {
      e.tensors = {a, b};
      e.message = "GPU load is unbalanced: " + a + " and " + b +
                  " have utilisation distributions at Jensen-Shannon distance " + Fmt(e.value) +
                  " > " + Fmt(threshold_) + " (mean utilisation " + Pct(gpus_[a].sum / gpus_[a].n) +
                  " vs " + Pct(gpus_[b].sum / gpus_[b].n) +
                  "). Check the data sharding, per-rank batch sizes and that every GPU is used";
    }
    ctx.Report(e);
  }

  void OnStepRecord(const std::string& stream, const StepRecord& r, RuleContext& ctx) override {
    if (r.mode != Mode::kTrain || r.end_us <= r.start_us) return;
    Worker& w = steps_[stream];
    w.steps.push_back(static_cast<double>(r.end_us - r.start_us));
    if (w.steps.size() > window_) w.steps.pop_front();
    w.median = Percentile({w.steps.begin(), w.steps.end()}, 50);
    if (steps_.size() < 2) return;
    std::string fast, slow;
    double lo = INFINITY, hi = -INFINITY;
    for (const auto& [s, w] : steps_) {
      if (w.steps.size() < window_) return;
      if (w.median < lo) lo = w.median, fast = s;
      if (w.median > hi) hi = w.median, slow = s;
    }
    Evaluation e = EvalFor("workers");
    e.step = r.step;
    e.mode = r.mode;
    e.value = lo > 0 ? (hi - lo) / lo : 0;
    e.threshold = worker_threshold_;
    e.violated = e.value > worker_threshold_;
    if (e.violated) {
      e.message = "workers are unbalanced: " + slow + " takes " + Ms(hi) + " per step (median of " +
                  std::to_string(window_) + "), " + Pct(100 * e.value) + " more than " + fast +
                  " (" + Ms(lo) + "; threshold " + Pct(100 * worker_threshold_) +
                  "). Check that shards and per-rank batch sizes are equal and the slow worker's "
                  "data loading and host";
    }
    ctx.Report(e);
  }

 private:
  struct Gpu {
    std::array<double, kBins> counts{};
    int64_t n = 0;
    double sum = 0;
  };
  static std::array<double, kBins> Normalised(const Gpu& g) {
    std::array<double, kBins> p{};
    for (int b = 0; b < kBins; ++b) p[b] = g.counts[b] / g.n;
    return p;
  }
  double threshold_;
  int64_t patience_;
  double worker_threshold_;
  size_t window_;
  std::map<std::string, Gpu> gpus_;
  struct Worker {
    std::deque<double> steps;  // durations of the last `window` TRAIN steps, µs
    double median = 0;
  };
  std::map<std::string, Worker> steps_;
};

}  // namespace

RuleType LoadBalancingRule() {
  RuleType t;
  t.name = "load_balancing";
  t.summary = "GPUs (or workers) with very different utilisation (step times)";
  t.params = {
      P("threshold", ParamType::kDouble, "0.5",
        "Jensen-Shannon distance between two GPUs' utilisation histograms"),
      P("patience", ParamType::kInt, "1000", "samples of each GPU before comparing"),
      P("worker_threshold", ParamType::kDouble, "0.5",
        "relative difference of median step time between workers (0.5 = 50 % slower)"),
      P("window", ParamType::kInt, "100", "TRAIN steps per worker in the comparison"),
      ScanIntervalParam(),
  };
  t.requirements = NoTensors;
  t.create = [](const RuleParams& p) -> Result<std::unique_ptr<Rule>> {
    if (!(p.Double("threshold") > 0) || !(p.Double("worker_threshold") > 0)) {
      return Status::InvalidArgument("rule load_balancing: thresholds must be > 0");
    }
    if (Status st = CheckAtLeast("load_balancing", p, "window", 1); !st.ok()) return st;
    if (Status st = CheckAtLeast("load_balancing", p, "patience", 1); !st.ok()) return st;
    return std::unique_ptr<Rule>(new LoadBalancing(p));
  };
  t.advice.title = "Unbalanced GPUs";
  t.advice.severity = Severity::kWarning;
  t.advice.stop_worthy = false;
  t.advice.advise = [](const RuleEventRecord&, const Measurements&) {
    return std::string(
        "GPUs are loaded unevenly: use a DistributedSampler with equal shards, keep "
        "logging/evaluation off the critical path of rank 0, and check that every GPU gets "
        "the same batch size.");
  };
  return t;
}

}  // namespace trainscope::rules
