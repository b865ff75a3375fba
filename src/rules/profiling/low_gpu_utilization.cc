// low_gpu_utilization (SageMaker LowGPUUtilization): per node and used GPU, once `patience`
// samples were seen, the p95 of the last `window` utilisation samples below threshold_p95
// (underutilised), or p95 above threshold_p95 with p5 below threshold_p5 (fluctuating).
#include <deque>
#include <map>

#include "rules/advice.h"
#include "rules/profiling/bottleneck.h"
#include "rules/profiling/profiling.h"

namespace trainscope::rules {
namespace {

class LowGpuUtilization : public SampleRule {
 public:
  explicit LowGpuUtilization(const RuleParams& p)
      : SampleRule("low_gpu_utilization", true),
        p95_thr_(p.Double("threshold_p95")),
        p5_thr_(p.Double("threshold_p5")),
        window_(static_cast<size_t>(p.Int("window"))),
        patience_(p.Int("patience")) {}

 protected:
  void OnSample(const std::string& stream, const SampleView& v, const GpuUsage& usage,
                RuleContext& ctx) override {
    Evaluation e = EvalFor(stream);
    bool evaluated = false;
    std::string msg;
    for (const auto& [i, g] : v.gpus) {
      if (!usage.Used(i) || !std::isfinite(g.util)) continue;
      History& h = history_[{stream, i}];
      h.n++;
      h.values.push_back(g.util);
      if (h.values.size() > window_) h.values.pop_front();
      if (h.n < patience_) continue;
      evaluated = true;
      std::vector<double> vals(h.values.begin(), h.values.end());
      double p95 = Percentile(vals, 95), p5 = Percentile(vals, 5), p50 = Percentile(vals, 50);
      std::string gpu = "gpu" + std::to_string(i);
      std::string stats = " over the last " + std::to_string(vals.size()) + " samples (p5 " +
                          Pct(p5) + ", p50 " + Pct(p50) + ", max " +
                          Pct(*std::max_element(vals.begin(), vals.end())) + ")";
      if (p95 < p95_thr_) {
        msg += (msg.empty() ? "" : "; ") + gpu + " on " + stream +
               " is underutilised: p95 utilisation " + Pct(p95) + " < " + Pct(p95_thr_) + stats;
        if (!e.violated || p95 < e.value) {
          e.value = p95;
          e.threshold = p95_thr_;
        }
        e.violated = true;
        e.tensors.push_back(schema::GpuMetric(i, schema::gpu::kUtil));
      } else if (p5 < p5_thr_) {
        msg += (msg.empty() ? "" : "; ") + gpu + " on " + stream + " fluctuates: p95 utilisation " +
               Pct(p95) + " but p5 " + Pct(p5) + " < " + Pct(p5_thr_) + stats;
        if (!e.violated) {
          e.value = p5;
          e.threshold = p5_thr_;
        }
        e.violated = true;
        e.tensors.push_back(schema::GpuMetric(i, schema::gpu::kUtil));
      }
    }
    if (!evaluated) return;
    if (e.violated) {
      e.message = msg +
                  ". Feed the GPU faster (data loading, CPU preprocessing), increase the batch "
                  "size, or use a smaller instance";
    }
    ctx.Report(e);
  }

 private:
  struct History {
    int64_t n = 0;
    std::deque<double> values;
  };
  double p95_thr_, p5_thr_;
  size_t window_;
  int64_t patience_;
  std::map<std::pair<std::string, int>, History> history_;
};

}  // namespace

RuleType LowGpuUtilizationRule() {
  RuleType t;
  t.name = "low_gpu_utilization";
  t.summary = "GPU utilisation low (p95) or fluctuating (p95 high, p5 low)";
  t.params = {
      P("threshold_p95", ParamType::kDouble, "70",
        "p95 utilisation % below which a GPU is underutilised"),
      P("threshold_p5", ParamType::kDouble, "10",
        "p5 utilisation % below which a busy GPU fluctuates"),
      P("window", ParamType::kInt, "500", "samples in the sliding window"),
      P("patience", ParamType::kInt, "1000", "samples of a GPU before evaluating it"),
      ScanIntervalParam(),
  };
  t.requirements = NoTensors;
  t.create = [](const RuleParams& p) -> Result<std::unique_ptr<Rule>> {
    for (const char* n : {"threshold_p95", "threshold_p5"}) {
      if (Status st = CheckPercent("low_gpu_utilization", p, n); !st.ok()) return st;
    }
    if (Status st = CheckAtLeast("low_gpu_utilization", p, "window", 1); !st.ok()) return st;
    if (Status st = CheckAtLeast("low_gpu_utilization", p, "patience", 1); !st.ok()) return st;
    return std::unique_ptr<Rule>(new LowGpuUtilization(p));
  };
  t.advice.title = "Low GPU utilisation";
  t.advice.severity = Severity::kWarning;
  t.advice.stop_worthy = false;
  t.advice.advise = [](const RuleEventRecord&, const Measurements& m) {
    std::string s = "GPU utilisation p95 " + text::Fixed(m.gpu_util_p95, 0) + "%";
    if (m.gpu_idle_share >= 0) s += ", idle " + text::Percent(m.gpu_idle_share) + " of the time";
    if (m.data_wait_share >= 0.2) {
      return s + ". The data loader is the cause (" + text::Percent(m.data_wait_share) +
             " of each step waits for data): " + advice::LoaderFix(m) + ".";
    }
    return s +
           ". The GPU has spare capacity: increase the batch size (scale the learning rate "
           "with it) or use a smaller/cheaper GPU (see Cost).";
  };
  return t;
}

}  // namespace trainscope::rules
