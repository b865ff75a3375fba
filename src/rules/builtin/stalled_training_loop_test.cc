#include "rules/builtin/rule_test_util.h"

namespace trainscope::rules::testing {
namespace {

TEST(StalledTrainingLoop, FiresAfterThresholdWithoutData) {
  auto rule = MakeRule(StalledTrainingLoopRule(), {{"threshold", "60"}});
  FakeContext ctx;
  StepData d = LossStep(7, 0.5);
  d.wall_us = 1'000'000;
  rule->OnStepData(d, ctx);
  rule->OnTick(1'000'000 + 59'000'000, ctx);
  EXPECT_TRUE(ctx.evals.empty());
  rule->OnTick(1'000'000 + 61'000'000, ctx);
  ASSERT_EQ(ctx.evals.size(), 1u);
  EXPECT_TRUE(ctx.evals[0].violated);
  EXPECT_EQ(ctx.evals[0].step, 7);
  EXPECT_NEAR(ctx.evals[0].value, 61, 1e-9);
  // Data resumes: a non-violated evaluation resets the streak.
  d.step = 8;
  d.wall_us = 70'000'000;
  rule->OnStepData(d, ctx);
  ASSERT_EQ(ctx.evals.size(), 2u);
  EXPECT_FALSE(ctx.evals[1].violated);
}

TEST(StalledTrainingLoop, SteadyDataDoesNotFire) {
  auto rule = MakeRule(StalledTrainingLoopRule(), {{"threshold", "10"}});
  FakeContext ctx;
  for (int s = 0; s < 100; ++s) {
    StepData d = LossStep(s, 0.5);
    d.wall_us = s * 5'000'000LL;
    rule->OnStepData(d, ctx);
    rule->OnTick(d.wall_us + 4'000'000, ctx);
  }
  EXPECT_EQ(ctx.Violations(), 0);
}

TEST(StalledTrainingLoop, StopOnFireAddsAction) {
  auto rule = MakeRule(StalledTrainingLoopRule(), {{"stop_training_on_fire", "true"}});
  ASSERT_EQ(rule->ExtraActions().size(), 1u);
  EXPECT_EQ(rule->ExtraActions()[0].type, ActionType::kStopTraining);
}

}  // namespace
}  // namespace trainscope::rules::testing
