#include "rules/builtin/rule_test_util.h"

namespace trainscope::rules::testing {
namespace {

StepData InputStep(FakeContext* ctx, const std::string& name, double scale) {
  std::vector<double> v;
  for (int b = 0; b < 8; ++b) {
    for (int u = 0; u < 10; ++u) v.push_back(scale * ((b % 2) ? 1 : -1) * (1 + 0.1 * u));
  }
  ctx->AddRaw(RawF32(name, 2, {8, 10}, v));
  StepData d = Step(2);
  d.raw.push_back(name);
  return d;
}

TEST(SaturatedActivation, FiresOnSaturatedTanh) {
  auto rule = MakeRule(SaturatedActivationRule());
  FakeContext ctx;
  rule->OnStepData(InputStep(&ctx, "tanh_input/lstm.cell", 20.0), ctx);
  ASSERT_EQ(ctx.evals.size(), 1u);
  EXPECT_TRUE(ctx.evals[0].violated);
  EXPECT_DOUBLE_EQ(ctx.evals[0].value, 100);
}

TEST(SaturatedActivation, SigmoidUsesItsOwnBounds) {
  auto rule = MakeRule(SaturatedActivationRule());
  FakeContext ctx;
  // |x| in [12, 22.8]: outside tanh bounds but inside sigmoid's lower bound; the upper bound
  // 16.99999 saturates the units with 1.2*... > 17 only on the positive half of the samples.
  rule->OnStepData(InputStep(&ctx, "sigmoid_input/gate", 12.0), ctx);
  ASSERT_EQ(ctx.evals.size(), 1u);
  EXPECT_FALSE(ctx.evals[0].violated);
}

TEST(SaturatedActivation, HealthyInputsDoNotFire) {
  auto rule = MakeRule(SaturatedActivationRule());
  FakeContext ctx;
  rule->OnStepData(InputStep(&ctx, "tanh_input/lstm.cell", 1.0), ctx);
  ASSERT_EQ(ctx.evals.size(), 1u);
  EXPECT_FALSE(ctx.evals[0].violated);
  EXPECT_DOUBLE_EQ(ctx.evals[0].value, 0);
}

}  // namespace
}  // namespace trainscope::rules::testing
