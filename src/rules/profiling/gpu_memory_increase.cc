// gpu_memory_increase (SageMaker GPUMemoryIncrease): per node and used GPU, once `patience`
// samples were seen, the mean memory use (% of the GPU's memory) of the last `window` samples
// exceeds that of the `window` samples before them by more than `increase` percentage points.
#include <deque>
#include <map>

#include "rules/advice.h"
#include "rules/profiling/bottleneck.h"
#include "rules/profiling/profiling.h"

namespace trainscope::rules {
namespace {

class GpuMemoryIncrease : public SampleRule {
 public:
  explicit GpuMemoryIncrease(const RuleParams& p)
      : SampleRule("gpu_memory_increase", true),
        increase_(p.Double("increase")),
        window_(static_cast<size_t>(p.Int("window"))),
        patience_(p.Int("patience")) {}

 protected:
  void OnSample(const std::string& stream, const SampleView& v, const GpuUsage& usage,
                RuleContext& ctx) override {
    Evaluation e = EvalFor(stream);
    e.threshold = increase_;
    bool evaluated = false;
    std::string msg;
    for (const auto& [i, g] : v.gpus) {
      double pct = g.MemPct();
      if (!usage.Used(i) || !std::isfinite(pct)) continue;
      History& h = history_[{stream, i}];
      h.n++;
      h.values.push_back(pct);
      if (h.values.size() > 2 * window_) h.values.pop_front();
      if (h.n < patience_ || h.values.size() < 2 * window_) continue;
      evaluated = true;
      double before = MeanOf(std::vector<double>(h.values.begin(), h.values.begin() + window_));
      double now = MeanOf(std::vector<double>(h.values.begin() + window_, h.values.end()));
      double rise = now - before;
      if (!e.violated || rise > e.value) e.value = rise;
      if (rise > increase_) {
        e.violated = true;
        e.tensors.push_back(schema::GpuMetric(i, schema::gpu::kMemUsedBytes));
        msg += (msg.empty() ? "" : "; ") + std::string("gpu") + std::to_string(i) + " on " +
               stream + " memory rose from " + Pct(before) + " to " + Pct(now) + " of " +
               Fmt(g.mem_total / (1 << 30)) + " GiB (+" + Fmt(rise) + " points > " +
               Fmt(increase_) + ") between two windows of " + std::to_string(window_) + " samples";
      }
    }
    if (!evaluated) return;
    if (e.violated) {
      e.message = msg +
                  ". A growing allocation can end in out-of-memory: look for tensors kept "
                  "across steps (accumulated losses or outputs with their graphs)";
    }
    ctx.Report(e);
  }

 private:
  struct History {
    int64_t n = 0;
    std::deque<double> values;
  };
  double increase_;
  size_t window_;
  int64_t patience_;
  std::map<std::pair<std::string, int>, History> history_;
};

}  // namespace

RuleType GpuMemoryIncreaseRule() {
  RuleType t;
  t.name = "gpu_memory_increase";
  t.summary = "GPU memory use rises by more than `increase` points between two windows";
  t.params = {
      P("increase", ParamType::kDouble, "5", "rise in percentage points of GPU memory"),
      P("patience", ParamType::kInt, "1000", "samples of a GPU before evaluating it"),
      P("window", ParamType::kInt, "10", "samples per window (two windows are compared)"),
      ScanIntervalParam(),
  };
  t.requirements = NoTensors;
  t.create = [](const RuleParams& p) -> Result<std::unique_ptr<Rule>> {
    if (Status st = CheckPercent("gpu_memory_increase", p, "increase"); !st.ok()) return st;
    if (Status st = CheckAtLeast("gpu_memory_increase", p, "window", 1); !st.ok()) return st;
    if (Status st = CheckAtLeast("gpu_memory_increase", p, "patience", 1); !st.ok()) return st;
    return std::unique_ptr<Rule>(new GpuMemoryIncrease(p));
  };
  t.advice.title = "GPU memory growing";
  t.advice.severity = Severity::kWarning;
  t.advice.stop_worthy = false;
  t.advice.advise = [](const RuleEventRecord&, const Measurements& m) {
    std::string s = "GPU memory keeps growing";
    if (m.gpu_mem_used_max_gb >= 0 && m.gpu_mem_total_gb > 0) {
      s += " (peak " + text::Fixed(m.gpu_mem_used_max_gb, 1) + " of " +
           text::Fixed(m.gpu_mem_total_gb, 0) + " GB)";
    }
    return s +
           ": a tensor is kept across steps. Log loss.item() rather than the loss tensor, "
           "detach() what you store, and clear lists of outputs each epoch.";
  };
  return t;
}

}  // namespace trainscope::rules
