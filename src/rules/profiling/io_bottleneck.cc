// io_bottleneck (SageMaker IOBottleneck): a GPU the training uses below gpu_threshold % while
// I/O wait (cpu.iowait) is above io_threshold %, in more than threshold % of the samples.
#include "rules/advice.h"
#include "rules/profiling/bottleneck.h"
#include "rules/profiling/profiling.h"

namespace trainscope::rules {

RuleType IoBottleneckRule() {
  RuleType t;
  t.name = "io_bottleneck";
  t.summary = "GPU nearly idle while the CPUs wait for I/O, in too many samples";
  t.params = {
      P("threshold", ParamType::kDouble, "50", "% of samples that must be bottlenecks to fire"),
      P("gpu_threshold", ParamType::kDouble, "10", "GPU utilisation % below which a GPU is idle"),
      P("io_threshold", ParamType::kDouble, "50", "cpu.iowait % above which I/O is the bottleneck"),
      P("patience", ParamType::kInt, "1000", "samples (with GPU readings) before evaluating"),
      ScanIntervalParam(),
  };
  t.requirements = NoTensors;
  t.create = [](const RuleParams& p) -> Result<std::unique_ptr<Rule>> {
    for (const char* n : {"threshold", "gpu_threshold", "io_threshold"}) {
      if (Status st = CheckPercent("io_bottleneck", p, n); !st.ok()) return st;
    }
    if (Status st = CheckAtLeast("io_bottleneck", p, "patience", 1); !st.ok()) return st;
    return std::unique_ptr<Rule>(new BottleneckRule(BottleneckRule::Kind::kIo, p));
  };
  t.advice.title = "I/O bottleneck";
  t.advice.severity = Severity::kWarning;
  t.advice.stop_worthy = false;
  t.advice.advise = [](const RuleEventRecord&, const Measurements& m) {
    std::string ev = advice::WaitEvidence(m);
    return (ev.empty() ? std::string("The GPU waits on storage") : advice::Cap(ev)) +
           ": copy the dataset to local SSD or RAM, read larger shards "
           "(WebDataset/tar, TFRecord) instead of many small files, and raise "
           "prefetch_factor.";
  };
  return t;
}

}  // namespace trainscope::rules
