#include "rules/builtin/rule_test_util.h"

namespace trainscope::rules::testing {
namespace {

// 4 samples x 4 units; `dead_units` columns are always zero.
StepData ReluStep(FakeContext* ctx, int dead_units) {
  std::vector<double> v;
  for (int b = 0; b < 4; ++b) {
    for (int u = 0; u < 4; ++u) v.push_back(u < dead_units ? 0.0 : (b + u) % 3 + 0.5);
  }
  ctx->AddRaw(RawF32("relu_output/block1.relu", 5, {4, 4}, v));
  StepData d = Step(5);
  d.raw.push_back("relu_output/block1.relu");
  return d;
}

TEST(DeadRelu, FiresWhenMostUnitsDead) {
  auto rule = MakeRule(DeadReluRule());
  FakeContext ctx;
  rule->OnStepData(ReluStep(&ctx, 3), ctx);
  ASSERT_EQ(ctx.evals.size(), 1u);
  EXPECT_TRUE(ctx.evals[0].violated);
  EXPECT_DOUBLE_EQ(ctx.evals[0].value, 75);
}

TEST(DeadRelu, HalfDeadDoesNotFire) {
  auto rule = MakeRule(DeadReluRule());
  FakeContext ctx;
  rule->OnStepData(ReluStep(&ctx, 2), ctx);
  ASSERT_EQ(ctx.evals.size(), 1u);
  EXPECT_FALSE(ctx.evals[0].violated);  // 50% is not > 50%
}

TEST(DeadRelu, MissingRawIsAWarning) {
  auto rule = MakeRule(DeadReluRule());
  FakeContext ctx;
  StepData d = Step(5);
  d.raw.push_back("relu_output/block1.relu");
  rule->OnStepData(d, ctx);
  EXPECT_TRUE(ctx.evals.empty());
  EXPECT_EQ(ctx.warnings.size(), 1u);
}

}  // namespace
}  // namespace trainscope::rules::testing
