#include "rules/builtin/rule_test_util.h"

namespace trainscope::rules::testing {
namespace {

StepData Batch(FakeContext* ctx, int64_t step, const std::vector<double>& labels,
               const std::vector<double>& preds, std::vector<int64_t> pred_shape = {}) {
  int64_t n = static_cast<int64_t>(labels.size());
  ctx->AddRaw(RawF32("inputs/labels", step, {n}, labels));
  ctx->AddRaw(RawF32("outputs/predictions", step,
                     pred_shape.empty() ? std::vector<int64_t>{n} : pred_shape, preds));
  StepData d = Step(step);
  d.raw = {"inputs/labels", "outputs/predictions"};
  return d;
}

TEST(ClassImbalance, FiresOnImbalancedLabels) {
  auto rule = MakeRule(ClassImbalanceRule(), {{"samples", "100"}});
  FakeContext ctx;
  for (int s = 0; s < 5; ++s) {
    std::vector<double> labels(24, 0.0);
    labels[0] = 1;  // class 1 once per batch: ratio 23
    rule->OnStepData(Batch(&ctx, s, labels, labels), ctx);
  }
  ASSERT_EQ(ctx.evals.size(), 1u);  // 120 samples after step 4
  EXPECT_TRUE(ctx.evals[0].violated);
  EXPECT_DOUBLE_EQ(ctx.evals[0].value, 23);
}

TEST(ClassImbalance, FiresOnMispredictedClass) {
  auto rule = MakeRule(ClassImbalanceRule(), {{"samples", "40"}});
  FakeContext ctx;
  // Balanced labels 0/1; class 1 always predicted as 0. Predictions are probabilities [N, 2].
  std::vector<double> labels, probs;
  for (int i = 0; i < 40; ++i) {
    labels.push_back(i % 2);
    probs.push_back(0.9);
    probs.push_back(0.1);
  }
  rule->OnStepData(Batch(&ctx, 0, labels, probs, {40, 2}), ctx);
  ASSERT_EQ(ctx.evals.size(), 1u);
  EXPECT_TRUE(ctx.evals[0].violated);
  EXPECT_DOUBLE_EQ(ctx.evals[0].value, 1.0);
}

TEST(ClassImbalance, BalancedAndAccurateDoesNotFire) {
  auto rule = MakeRule(ClassImbalanceRule(), {{"samples", "30"}});
  FakeContext ctx;
  std::vector<double> labels;
  for (int i = 0; i < 30; ++i) labels.push_back(i % 3);
  rule->OnStepData(Batch(&ctx, 0, labels, labels), ctx);
  ASSERT_EQ(ctx.evals.size(), 1u);
  EXPECT_FALSE(ctx.evals[0].violated);
}

}  // namespace
}  // namespace trainscope::rules::testing
