// cpu_bottleneck (SageMaker CPUBottleneck): a GPU the training uses below gpu_threshold % while
// a CPU core is above cpu_threshold %, in more than threshold % of the samples.
#include "rules/advice.h"
#include "rules/profiling/bottleneck.h"
#include "rules/profiling/profiling.h"

namespace trainscope::rules {

RuleType CpuBottleneckRule() {
  RuleType t;
  t.name = "cpu_bottleneck";
  t.summary = "GPU nearly idle while a CPU core is saturated, in too many samples";
  t.params = {
      P("threshold", ParamType::kDouble, "50", "% of samples that must be bottlenecks to fire"),
      P("gpu_threshold", ParamType::kDouble, "10", "GPU utilisation % below which a GPU is idle"),
      P("cpu_threshold", ParamType::kDouble, "90", "core utilisation % above which CPU is busy"),
      P("patience", ParamType::kInt, "1000", "samples (with GPU readings) before evaluating"),
      ScanIntervalParam(),
  };
  t.requirements = NoTensors;
  t.create = [](const RuleParams& p) -> Result<std::unique_ptr<Rule>> {
    for (const char* n : {"threshold", "gpu_threshold", "cpu_threshold"}) {
      if (Status st = CheckPercent("cpu_bottleneck", p, n); !st.ok()) return st;
    }
    if (Status st = CheckAtLeast("cpu_bottleneck", p, "patience", 1); !st.ok()) return st;
    return std::unique_ptr<Rule>(new BottleneckRule(BottleneckRule::Kind::kCpu, p));
  };
  t.advice.title = "CPU bottleneck";
  t.advice.severity = Severity::kWarning;
  t.advice.stop_worthy = false;
  t.advice.advise = [](const RuleEventRecord&, const Measurements& m) {
    std::string ev = advice::WaitEvidence(m);
    std::string s = ev.empty() ? "The CPU cannot feed the GPU" : advice::Cap(ev);
    if (m.cpu_util_p95 >= 0) s += "; CPU p95 " + text::Fixed(m.cpu_util_p95, 0) + "%";
    return s + ": " + advice::LoaderFix(m) +
           ", and move augmentation to the GPU or precompute it. A bigger GPU would not "
           "help.";
  };
  return t;
}

}  // namespace trainscope::rules
