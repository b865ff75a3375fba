#include "rules/builtin/rule_test_util.h"

namespace trainscope::rules::testing {
namespace {

TEST(VanishingGradient, FiresOnTinyGradients) {
  auto rule = MakeRule(VanishingGradientRule());
  FakeContext ctx;
  StepData d = Step(10);
  d.summaries.push_back(Summary("gradients/fc1.weight", 10, {1e-9, -2e-9, 1e-9}));
  d.summaries.push_back(Summary("gradients/fc2.weight", 10, {0.1, -0.2}));
  d.summaries.push_back(Summary("weights/fc1.weight", 10, {0, 0}));  // not a gradient
  rule->OnStepData(d, ctx);
  ASSERT_EQ(ctx.evals.size(), 1u);
  EXPECT_TRUE(ctx.evals[0].violated);
  EXPECT_EQ(ctx.evals[0].tensors, std::vector<std::string>{"gradients/fc1.weight"});
  EXPECT_NEAR(ctx.evals[0].value, 4e-9 / 3, 1e-15);
  EXPECT_DOUBLE_EQ(ctx.evals[0].threshold, 1e-7);
}

TEST(VanishingGradient, HealthyGradientsDoNotFire) {
  auto rule = MakeRule(VanishingGradientRule(), {{"threshold", "1e-5"}});
  FakeContext ctx;
  for (int s = 0; s < 5; ++s) {
    StepData d = Step(s);
    d.summaries.push_back(Summary("gradients/fc1.weight", s, {1e-3, -2e-3}));
    rule->OnStepData(d, ctx);
  }
  EXPECT_EQ(ctx.evals.size(), 5u);
  EXPECT_EQ(ctx.Violations(), 0);
}

TEST(VanishingGradient, NoGradientsNoEvaluation) {
  auto rule = MakeRule(VanishingGradientRule());
  FakeContext ctx;
  StepData d = LossStep(1, 0.5);
  rule->OnStepData(d, ctx);
  EXPECT_TRUE(ctx.evals.empty());
}

}  // namespace
}  // namespace trainscope::rules::testing
