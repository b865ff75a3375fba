// batch_size (SageMaker BatchSize): per node, once `patience` samples with GPU readings were
// seen, the p95 of total CPU utilisation over the last `window` samples is below
// cpu_threshold_p95 and, for some used GPU, both the p95 of its utilisation and of its memory
// use are below theirs: the batch is likely too small (or the instance too large).
#include <deque>
#include <map>

#include "rules/advice.h"
#include "rules/profiling/bottleneck.h"
#include "rules/profiling/profiling.h"

namespace trainscope::rules {
namespace {

class BatchSize : public SampleRule {
 public:
  explicit BatchSize(const RuleParams& p)
      : SampleRule("batch_size", true),
        cpu_thr_(p.Double("cpu_threshold_p95")),
        gpu_thr_(p.Double("gpu_threshold_p95")),
        mem_thr_(p.Double("gpu_memory_threshold_p95")),
        window_(static_cast<size_t>(p.Int("window"))),
        patience_(p.Int("patience")) {}

 protected:
  void OnSample(const std::string& stream, const SampleView& v, const GpuUsage& usage,
                RuleContext& ctx) override {
    if (!std::isfinite(v.cpu_util)) return;
    Node& n = nodes_[stream];
    bool any = false;
    for (const auto& [i, g] : v.gpus) {
      if (!usage.Used(i) || !std::isfinite(g.util) || !std::isfinite(g.MemPct())) continue;
      any = true;
      Push(&n.util[i], g.util);
      Push(&n.mem[i], g.MemPct());
    }
    if (!any) return;
    Push(&n.cpu, v.cpu_util);
    if (++n.datapoints < patience_) return;
    Evaluation e = EvalFor(stream);
    e.threshold = gpu_thr_;
    double cpu95 = Percentile({n.cpu.begin(), n.cpu.end()}, 95);
    std::string msg;
    for (const auto& [i, u] : n.util) {
      if (!usage.Used(i)) continue;
      double u95 = Percentile({u.begin(), u.end()}, 95);
      double m95 = Percentile({n.mem[i].begin(), n.mem[i].end()}, 95);
      if (!e.violated || u95 < e.value) e.value = u95;
      if (cpu95 < cpu_thr_ && u95 < gpu_thr_ && m95 < mem_thr_) {
        e.violated = true;
        e.tensors.push_back(schema::GpuMetric(i, schema::gpu::kUtil));
        msg += (msg.empty() ? "" : ", ") + std::string("gpu") + std::to_string(i) +
               " p95 utilisation " + Pct(u95) + " < " + Pct(gpu_thr_) + " and p95 memory " +
               Pct(m95) + " < " + Pct(mem_thr_);
      }
    }
    if (e.violated) {
      e.message = "the batch size may be too small on " + stream + ": p95 CPU " + Pct(cpu95) +
                  " < " + Pct(cpu_thr_) + ", " + msg + " over the last " +
                  std::to_string(n.cpu.size()) +
                  " samples. Increase the batch size (scale the learning rate) or use a "
                  "smaller instance";
    }
    ctx.Report(e);
  }

 private:
  void Push(std::deque<double>* d, double v) {
    d->push_back(v);
    if (d->size() > window_) d->pop_front();
  }
  struct Node {
    int64_t datapoints = 0;
    std::deque<double> cpu;
    std::map<int, std::deque<double>> util, mem;
  };
  double cpu_thr_, gpu_thr_, mem_thr_;
  size_t window_;
  int64_t patience_;
  std::map<std::string, Node> nodes_;
};

}  // namespace

RuleType BatchSizeRule() {
  RuleType t;
  t.name = "batch_size";
  t.summary = "CPU, GPU and GPU memory all lightly used: batch too small or instance too large";
  t.params = {
      P("cpu_threshold_p95", ParamType::kDouble, "70", "p95 of total CPU utilisation %"),
      P("gpu_threshold_p95", ParamType::kDouble, "70", "p95 of GPU utilisation %"),
      P("gpu_memory_threshold_p95", ParamType::kDouble, "70", "p95 of GPU memory use %"),
      P("patience", ParamType::kInt, "1000", "samples (with GPU readings) before evaluating"),
      P("window", ParamType::kInt, "500", "samples in the sliding window"),
      ScanIntervalParam(),
  };
  t.requirements = NoTensors;
  t.create = [](const RuleParams& p) -> Result<std::unique_ptr<Rule>> {
    for (const char* n : {"cpu_threshold_p95", "gpu_threshold_p95", "gpu_memory_threshold_p95"}) {
      if (Status st = CheckPercent("batch_size", p, n); !st.ok()) return st;
    }
    if (Status st = CheckAtLeast("batch_size", p, "window", 1); !st.ok()) return st;
    if (Status st = CheckAtLeast("batch_size", p, "patience", 1); !st.ok()) return st;
    return std::unique_ptr<Rule>(new BatchSize(p));
  };
  t.advice.title = "Batch size too small";
  t.advice.severity = Severity::kInfo;
  t.advice.stop_worthy = false;
  t.advice.advise = [](const RuleEventRecord&, const Measurements& m) {
    std::string s = "GPU utilisation p95 " + text::Fixed(m.gpu_util_p95, 0) + "%";
    if (m.gpu_mem_used_max_gb >= 0 && m.gpu_mem_total_gb > 0) {
      s += " with " + text::Fixed(m.gpu_mem_used_max_gb, 1) + " of " +
           text::Fixed(m.gpu_mem_total_gb, 0) + " GB GPU memory used";
    }
    return s +
           ": the GPU has room for more work. Double the batch size (and scale the "
           "learning rate), or move to a smaller instance (see Cost).";
  };
  return t;
}

}  // namespace trainscope::rules
