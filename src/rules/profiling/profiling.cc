// AddProfilingRules: the profiling rule types, listed explicitly.
#include "rules/profiling/profiling.h"

namespace trainscope::rules {

Status AddProfilingRules(RuleRegistry* registry) {
  for (auto make : {CpuBottleneckRule, IoBottleneckRule, LowGpuUtilizationRule,
                    GpuMemoryIncreaseRule, BatchSizeRule, LoadBalancingRule, StepOutlierRule,
                    MaxInitializationTimeRule, DataloaderRule}) {
    Status st = registry->Add(make());
    if (!st.ok()) return st;
  }
  return Status::OK();
}

}  // namespace trainscope::rules
