#include "rules/builtin/rule_test_util.h"

namespace trainscope::rules::testing {
namespace {

TEST(DeadLoss, FiresOnConstantLoss) {
  auto rule = MakeRule(DeadLossRule());
  FakeContext ctx;
  for (int s = 0; s < 5; ++s) rule->OnStepData(LossStep(s, 1.0 / (s + 1)), ctx);
  for (int s = 5; s < 10; ++s) rule->OnStepData(LossStep(s, 0.6931), ctx);
  const Evaluation* v = ctx.FirstViolation();
  ASSERT_NE(v, nullptr);
  EXPECT_EQ(v->step, 9);
  EXPECT_NE(v->message.find("constant"), std::string::npos);
}

TEST(DeadLoss, FiresOnNonFiniteLoss) {
  auto rule = MakeRule(DeadLossRule(), {{"num_steps", "3"}});
  FakeContext ctx;
  rule->OnStepData(LossStep(0, 1.0), ctx);
  for (int s = 1; s < 4; ++s) rule->OnStepData(LossStep(s, NAN), ctx);
  ASSERT_NE(ctx.FirstViolation(), nullptr);
  EXPECT_EQ(ctx.FirstViolation()->step, 3);
}

TEST(DeadLoss, ChangingLossDoesNotFire) {
  auto rule = MakeRule(DeadLossRule());
  FakeContext ctx;
  for (int s = 0; s < 50; ++s) rule->OnStepData(LossStep(s, 0.5 + 0.001 * Noise(s)), ctx);
  EXPECT_EQ(ctx.Violations(), 0);
  EXPECT_EQ(ctx.evals.size(), 50u);
}

}  // namespace
}  // namespace trainscope::rules::testing
