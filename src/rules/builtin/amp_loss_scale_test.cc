#include "rules/builtin/amp_scalars.h"
#include "rules/builtin/rule_test_util.h"

namespace trainscope::rules::testing {
namespace {

// A GradScaler step as the hook records it: the scale the step used, amp/skipped when skipped.
StepData ScalerStep(int64_t step, double scale, bool skipped) {
  StepData d = LossStep(step, 0.5);
  d.scalars.push_back(Scalar(kAmpLossScale, step, scale));
  if (skipped) d.scalars.push_back(Scalar(kAmpSkipped, step, 1));
  return d;
}

// Feeds `skips` (true: skipped) from scale 2^16 on, halving after each skip as GradScaler does.
void Feed(Rule* rule, FakeContext* ctx, const std::vector<bool>& skips, int64_t first = 0) {
  double scale = 65536;
  for (size_t i = 0; i < skips.size(); ++i) {
    rule->OnStepData(ScalerStep(first + static_cast<int64_t>(i), scale, skips[i]), *ctx);
    if (skips[i]) scale /= 2;
  }
}

TEST(AmpLossScale, HealthyRunWithTheUsualFirstSkipsIsQuiet) {
  auto rule = MakeRule(AmpLossScaleRule());
  FakeContext ctx;
  std::vector<bool> skips(500, false);
  for (int i : {0, 1, 2, 3, 4, 5, 250}) skips[static_cast<size_t>(i)] = true;  // calibration
  Feed(rule.get(), &ctx, skips);
  EXPECT_EQ(ctx.Violations(), 0);
  EXPECT_EQ(ctx.evals.size(), 500u);
}

TEST(AmpLossScale, FiresAfterTooManyConsecutiveSkips) {
  auto rule = MakeRule(AmpLossScaleRule());
  FakeContext ctx;
  std::vector<bool> skips(30, false);
  for (size_t i = 5; i < 30; ++i) skips[i] = true;  // inf gradients from step 5 on
  Feed(rule.get(), &ctx, skips);
  const Evaluation* v = ctx.FirstViolation();
  ASSERT_NE(v, nullptr);
  EXPECT_EQ(v->step, 15);  // the 11th skip in a row
  EXPECT_EQ(v->value, 11);
  EXPECT_EQ(v->threshold, 10);
  EXPECT_NE(v->message.find("skipped the last 11"), std::string::npos) << v->message;
  EXPECT_EQ(v->tensors, std::vector<std::string>{kAmpLossScale});
}

TEST(AmpLossScale, FiresWhenTheScaleFallsBelowMinScale) {
  auto rule = MakeRule(AmpLossScaleRule(), {{"min_scale", "1024"}});
  FakeContext ctx;
  std::vector<bool> skips(40, false);
  for (size_t i = 0; i < 40; i += 2) skips[i] = true;  // every other step: never 2 in a row
  Feed(rule.get(), &ctx, skips);
  const Evaluation* v = ctx.FirstViolation();
  ASSERT_NE(v, nullptr);
  EXPECT_EQ(v->step, 13);  // after 7 skips (steps 0, 2, ..., 12): 65536 / 2^7 = 512
  EXPECT_EQ(v->value, 512);
  EXPECT_NE(v->message.find("fell to 512"), std::string::npos) << v->message;
}

TEST(AmpLossScale, FiresWhenTooManyRecentStepsWereSkipped) {
  auto rule = MakeRule(AmpLossScaleRule(), {{"window", "20"}, {"min_scale", "0"}});
  FakeContext ctx;
  std::vector<bool> skips(60, false);
  for (size_t i = 0; i < 60; i += 3) skips[i] = true;  // a third of the steps
  Feed(rule.get(), &ctx, skips);
  const Evaluation* v = ctx.FirstViolation();
  ASSERT_NE(v, nullptr);
  EXPECT_EQ(v->step, 19);  // the first full window: 7 of 20
  EXPECT_DOUBLE_EQ(v->value, 7.0 / 20);
  EXPECT_NE(v->message.find("7 of the last 20"), std::string::npos) << v->message;
}

TEST(AmpLossScale, StepsWithoutAScalerAreNotEvaluated) {
  auto rule = MakeRule(AmpLossScaleRule());
  FakeContext ctx;
  for (int s = 0; s < 20; ++s) rule->OnStepData(LossStep(s, 0.5), ctx);
  EXPECT_TRUE(ctx.evals.empty());
}

TEST(AmpLossScale, RejectsBadParameters) {
  RuleType type = AmpLossScaleRule();
  for (const auto& bad : std::vector<std::map<std::string, std::string>>{
           {{"window", "0"}}, {{"max_consecutive_skips", "0"}}, {{"max_skip_fraction", "0"}}}) {
    auto p = RuleParams::Parse(type.name, type.params, bad);
    ASSERT_TRUE(p.ok());
    EXPECT_FALSE(type.create(p.value()).ok());
  }
}

}  // namespace
}  // namespace trainscope::rules::testing
