#include "rules/builtin/rule_test_util.h"

namespace trainscope::rules::testing {
namespace {

// Trains `epochs` epochs of 20 steps; after each, 5 EVAL steps with loss val(epoch).
template <typename Val>
void RunEpochs(Rule* rule, FakeContext* ctx, int epochs, Val val) {
  int64_t step = 0;
  for (int ep = 0; ep < epochs; ++ep) {
    for (int i = 0; i < 20; ++i, ++step) {
      rule->OnStepData(LossStep(step, 1.0 / (1 + 0.1 * step) * (1 + 0.05 * Noise(step))), *ctx);
    }
    for (int i = 0; i < 5; ++i, ++step) {
      rule->OnStepData(LossStep(step, val(ep) * (1 + 0.01 * Noise(step)), Mode::kEval), *ctx);
    }
  }
  rule->OnEnd(*ctx);
}

TEST(Overfit, DoesNotFireWhileValidationImproves) {
  auto rule = MakeRule(OverfitRule());
  FakeContext ctx;
  // Validation far above training (ratio >> 0.1) but still improving every epoch.
  RunEpochs(rule.get(), &ctx, 10, [](int ep) { return 3.0 - 0.2 * ep; });
  EXPECT_EQ(ctx.evals.size(), 10u);
  EXPECT_EQ(ctx.Violations(), 0);
}

TEST(Overfit, FiresWhenValidationStopsImprovingAboveTraining) {
  auto rule = MakeRule(OverfitRule());
  FakeContext ctx;
  RunEpochs(rule.get(), &ctx, 10, [](int ep) { return ep < 4 ? 2.0 - 0.2 * ep : 1.2 + 0.1 * ep; });
  const Evaluation* v = ctx.FirstViolation();
  ASSERT_NE(v, nullptr);
  EXPECT_EQ(v->mode, Mode::kEval);
  // Epoch 4 (1.6) is not yet a trend after 2.0..1.4: the slope of the last 8 evaluations
  // (epochs 2..9: 1.6 1.4 1.6 ... 2.1) is >= 3 standard errors at the 10th eval phase.
  EXPECT_EQ(v->step, 10 * 25 - 1);
  EXPECT_GT(v->value, 0.1);
}

TEST(Overfit, PatienceDelaysFiring) {
  auto rule = MakeRule(OverfitRule(), {{"patience", "3"}});
  FakeContext ctx;
  RunEpochs(rule.get(), &ctx, 14, [](int ep) { return ep < 4 ? 2.0 - 0.2 * ep : 1.2 + 0.1 * ep; });
  ASSERT_NE(ctx.FirstViolation(), nullptr);
  EXPECT_EQ(ctx.FirstViolation()->step, 12 * 25 - 1);
}

// A validation loss far above training that is flat within ±5 % noise (each evaluation fails to
// beat the best now and then) is not a rising trend: SageMaker's literal rule would fire on it.
TEST(Overfit, NoisyFlatValidationDoesNotFire) {
  auto rule = MakeRule(OverfitRule());
  FakeContext ctx;
  RunEpochs(rule.get(), &ctx, 30,
            [](int ep) { return (1.0 - 0.003 * ep) * (1 + 0.05 * Noise(1000 + ep)); });
  EXPECT_EQ(ctx.evals.size(), 30u);
  EXPECT_EQ(ctx.Violations(), 0);
}

TEST(Overfit, TrendEvaluationsBelowThreeIsAnError) {
  auto t = OverfitRule();
  auto p = RuleParams::Parse(t.name, t.params, {{"trend_evaluations", "2"}});
  ASSERT_TRUE(p.ok());
  EXPECT_FALSE(t.create(p.value()).ok());
}

TEST(Overfit, WarnsWithoutEvalData) {
  auto rule = MakeRule(OverfitRule());
  FakeContext ctx;
  for (int s = 0; s < 10; ++s) rule->OnStepData(LossStep(s, 1.0), ctx);
  rule->OnEnd(ctx);
  EXPECT_TRUE(ctx.evals.empty());
  ASSERT_EQ(ctx.warnings.size(), 1u);
}

}  // namespace
}  // namespace trainscope::rules::testing
