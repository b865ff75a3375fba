// The shared logic of cpu_bottleneck and io_bottleneck (SageMaker's CPUBottleneck and
// IOBottleneck): per node, the share of samples in which a GPU the training uses is nearly idle
// while the CPU (busiest core) or I/O wait is high. Fires once `patience` samples with GPU
// readings were seen and that share is above `threshold` percent.
#pragma once

#include <map>

#include "rules/profiling/profiling_util.h"

namespace trainscope::rules {

class BottleneckRule : public SampleRule {
 public:
  enum class Kind { kCpu, kIo };
  BottleneckRule(Kind kind, const RuleParams& p)
      : SampleRule(kind == Kind::kCpu ? "cpu_bottleneck" : "io_bottleneck", true),
        kind_(kind),
        threshold_(p.Double("threshold")),
        gpu_threshold_(p.Double("gpu_threshold")),
        other_threshold_(kind == Kind::kCpu ? p.Double("cpu_threshold") : p.Double("io_threshold")),
        patience_(p.Int("patience")) {}

 protected:
  void OnSample(const std::string& stream, const SampleView& v, const GpuUsage& usage,
                RuleContext& ctx) override {
    double min_gpu = INFINITY;
    for (const auto& [i, g] : v.gpus) {
      if (usage.Used(i) && std::isfinite(g.util)) min_gpu = std::min(min_gpu, g.util);
    }
    double other = kind_ == Kind::kCpu ? v.MaxCore() : v.iowait;
    if (!std::isfinite(min_gpu) || !std::isfinite(other)) return;  // not a datapoint
    Node& n = nodes_[stream];
    n.datapoints++;
    if (min_gpu < gpu_threshold_ && other > other_threshold_) {
      n.bottlenecks++;
      n.gpu_sum += min_gpu;
      n.other_sum += other;
      n.cpu_sum += std::isfinite(v.cpu_util) ? v.cpu_util : 0;
    }
    if (n.datapoints < patience_) return;
    Evaluation e = EvalFor(stream);
    e.value = 100.0 * n.bottlenecks / n.datapoints;
    e.threshold = threshold_;
    e.violated = e.value > threshold_;
    if (e.violated) {
      double b = static_cast<double>(n.bottlenecks);
      std::string what = kind_ == Kind::kCpu ? "CPU" : "I/O";
      e.message =
          what + " bottleneck on " + stream + " in " + Pct(e.value) + " of " +
          std::to_string(n.datapoints) + " samples (threshold " + Pct(threshold_) +
          "): a GPU below " + Pct(gpu_threshold_) + " utilisation while " +
          (kind_ == Kind::kCpu ? "a CPU core was above " : "I/O wait was above ") +
          Pct(other_threshold_) + "; in those samples GPU " + Pct(n.gpu_sum / b) +
          (kind_ == Kind::kCpu
               ? ", busiest core " + Pct(n.other_sum / b) + ", all cores " + Pct(n.cpu_sum / b) +
                     ". Move preprocessing off the training process (more data-loader "
                     "workers, prefetching) or onto the GPU"
               : ", I/O wait " + Pct(n.other_sum / b) +
                     ". Read data from faster storage, cache it, or prefetch with more "
                     "data-loader workers");
    }
    ctx.Report(e);
  }

 private:
  struct Node {
    int64_t datapoints = 0;
    int64_t bottlenecks = 0;
    double gpu_sum = 0, other_sum = 0, cpu_sum = 0;
  };
  Kind kind_;
  double threshold_, gpu_threshold_, other_threshold_;
  int64_t patience_;
  std::map<std::string, Node> nodes_;
};

inline Status CheckPercent(const std::string& rule, const RuleParams& p, const std::string& name) {
  double v = p.Double(name);
  if (!(v >= 0 && v <= 100)) {
    return Status::InvalidArgument("rule " + rule + ": " + name + " must be in [0, 100], got " +
                                   Fmt(v));
  }
  return Status::OK();
}

inline Status CheckAtLeast(const std::string& rule, const RuleParams& p, const std::string& name,
                           int64_t min) {
  if (p.Int(name) < min) {
    return Status::InvalidArgument("rule " + rule + ": " + name +
                                   " must be >= " + std::to_string(min));
  }
  return Status::OK();
}

// Requirements of rules that only read system samples / step records: no tensors.
inline RuleRequirements NoTensors(const RuleParams&) {
  RuleRequirements r;
  r.modes = {Mode::kTrain};
  return r;
}

}  // namespace trainscope::rules
