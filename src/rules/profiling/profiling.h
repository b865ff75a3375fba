// The profiling rules (SageMaker Debugger's profiler rules, same names and parameters), on the
// same engine as the tensor rules. They read StepRecords and SystemSampleRecords instead of
// tensors. docs/rules-profiling.md describes each rule, its parameters and its logic.
#pragma once

#include "trainscope/rules.h"

namespace trainscope::rules {

RuleType CpuBottleneckRule();
RuleType IoBottleneckRule();
RuleType LowGpuUtilizationRule();
RuleType GpuMemoryIncreaseRule();
RuleType BatchSizeRule();
RuleType LoadBalancingRule();
RuleType StepOutlierRule();
RuleType MaxInitializationTimeRule();
RuleType DataloaderRule();

// Adds the nine profiling rule types to `registry`; AlreadyExists when one is there already.
Status AddProfilingRules(RuleRegistry* registry);

}  // namespace trainscope::rules
