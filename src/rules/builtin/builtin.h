// The built-in tensor rules (one file each in this directory; docs/rules.md describes them).
#pragma once

#include "trainscope/rules.h"

namespace trainscope::rules {

RuleType VanishingGradientRule();
RuleType ExplodingTensorRule();
RuleType LossNotDecreasingRule();
RuleType DeadLossRule();
RuleType OverfitRule();
RuleType OvertrainingRule();
RuleType StalledTrainingLoopRule();
RuleType WeightUpdateRatioRule();
RuleType DeadReluRule();
RuleType SaturatedActivationRule();
RuleType PoorWeightInitializationRule();
RuleType TensorVarianceRule();
RuleType UnchangedTensorRule();
RuleType AllZeroRule();
RuleType ClassImbalanceRule();
RuleType CheckInputImagesRule();
RuleType AmpLossScaleRule();
RuleType StragglerRule();

}  // namespace trainscope::rules
