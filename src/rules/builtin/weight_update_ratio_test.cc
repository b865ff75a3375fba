#include "rules/builtin/rule_test_util.h"

namespace trainscope::rules::testing {
namespace {

StepData WeightStep(FakeContext* ctx, int64_t step, const std::vector<double>& w) {
  ctx->AddRaw(RawF32("weights/fc1.weight", step, {2, 2}, w));
  StepData d = Step(step);
  d.raw.push_back("weights/fc1.weight");
  return d;
}

TEST(WeightUpdateRatio, FiresOnFrozenWeights) {
  auto rule = MakeRule(WeightUpdateRatioRule());
  FakeContext ctx;
  rule->OnStepData(WeightStep(&ctx, 0, {1, 2, 3, 4}), ctx);
  EXPECT_TRUE(ctx.evals.empty());  // needs two steps
  rule->OnStepData(WeightStep(&ctx, 10, {1, 2, 3, 4}), ctx);
  ASSERT_EQ(ctx.evals.size(), 1u);
  EXPECT_TRUE(ctx.evals[0].violated);
  EXPECT_EQ(ctx.evals[0].value, 0);
  EXPECT_DOUBLE_EQ(ctx.evals[0].threshold, 1e-8);
}

TEST(WeightUpdateRatio, FiresOnHugeUpdate) {
  auto rule = MakeRule(WeightUpdateRatioRule());
  FakeContext ctx;
  rule->OnStepData(WeightStep(&ctx, 0, {0.01, 0.01, 0.01, 0.01}), ctx);
  rule->OnStepData(WeightStep(&ctx, 1, {5, -5, 5, -5}), ctx);
  ASSERT_EQ(ctx.evals.size(), 1u);
  EXPECT_TRUE(ctx.evals[0].violated);
  // diffs 4.99, -5.01, 4.99, -5.01 over a weight norm of 0.02.
  EXPECT_NEAR(ctx.evals[0].value, std::sqrt(2 * 4.99 * 4.99 + 2 * 5.01 * 5.01) / (0.02 + 1e-9),
              1e-3);
}

TEST(WeightUpdateRatio, NormalUpdateDoesNotFire) {
  auto rule = MakeRule(WeightUpdateRatioRule(), {{"num_steps", "20"}});
  FakeContext ctx;
  for (int s = 0; s <= 50; s += 10) {
    double k = 1 + 0.001 * s;
    rule->OnStepData(WeightStep(&ctx, s, {1 * k, 2 * k, -3 * k, 4 * k}), ctx);
  }
  EXPECT_EQ(ctx.evals.size(), 4u);  // steps 20, 30, 40, 50 (each vs 20 steps earlier)
  EXPECT_EQ(ctx.Violations(), 0);
  EXPECT_NEAR(ctx.evals[0].value, 0.02 / 1.0, 1e-6);
}

TEST(WeightUpdateRatio, SelectorIsRaw) {
  auto rule = MakeRule(WeightUpdateRatioRule());
  ASSERT_EQ(rule->Selectors().size(), 1u);
  EXPECT_TRUE(rule->Selectors()[0]->raw);
}

}  // namespace
}  // namespace trainscope::rules::testing
