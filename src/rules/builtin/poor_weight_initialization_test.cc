#include "rules/builtin/rule_test_util.h"

namespace trainscope::rules::testing {
namespace {

StepData InitStep(int64_t step, double var1, double var2, double loss) {
  StepData d = LossStep(step, loss);
  double a = std::sqrt(var1), b = std::sqrt(var2);
  d.summaries.push_back(Summary("relu_input/fc1", step, {a, -a, a, -a}));
  d.summaries.push_back(Summary("relu_input/fc2", step, {b, -b, b, -b}));
  return d;
}

TEST(PoorWeightInitialization, FiresOnVarianceRatio) {
  auto rule = MakeRule(PoorWeightInitializationRule());
  FakeContext ctx;
  rule->OnStepData(InitStep(0, 1.0, 50.0, 2.3), ctx);
  ASSERT_EQ(ctx.evals.size(), 1u);
  EXPECT_TRUE(ctx.evals[0].violated);
  EXPECT_NEAR(ctx.evals[0].value, 50, 1e-9);
}

TEST(PoorWeightInitialization, FiresWhenLossDoesNotDecrease) {
  auto rule = MakeRule(PoorWeightInitializationRule());
  FakeContext ctx;
  for (int s = 0; s < 8; ++s) rule->OnStepData(InitStep(s, 1.0, 2.0, 2.3), ctx);
  const Evaluation* v = ctx.FirstViolation();
  ASSERT_NE(v, nullptr);
  EXPECT_EQ(v->step, 5);
  EXPECT_NE(v->message.find("did not decrease"), std::string::npos);
}

TEST(PoorWeightInitialization, GoodInitDoesNotFireAndStopsAfterSteps) {
  auto rule = MakeRule(PoorWeightInitializationRule());
  FakeContext ctx;
  for (int s = 0; s < 30; ++s) rule->OnStepData(InitStep(s, 1.0, 2.0, 2.3 - 0.1 * s), ctx);
  EXPECT_EQ(ctx.evals.size(), 10u);
  EXPECT_EQ(ctx.Violations(), 0);
}

TEST(PoorWeightInitialization, NarrowGradientHistogramFires) {
  auto rule = MakeRule(PoorWeightInitializationRule());
  FakeContext ctx;
  StepData d = Step(0);
  SummaryRecord g = Summary("gradients/fc1.weight", 0, {1e-5, -1e-5});
  g.stats.histogram.lo = -1e-4;
  g.stats.histogram.hi = 1e-4;
  g.stats.histogram.counts = {0, 10, 10, 0};
  d.summaries.push_back(g);
  rule->OnStepData(d, ctx);
  ASSERT_EQ(ctx.evals.size(), 1u);
  EXPECT_TRUE(ctx.evals[0].violated);
  EXPECT_NEAR(ctx.evals[0].value, 0.9e-4, 1e-9);
}

}  // namespace
}  // namespace trainscope::rules::testing
