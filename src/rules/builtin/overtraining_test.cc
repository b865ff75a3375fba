#include <cmath>

#include "rules/builtin/rule_test_util.h"

namespace trainscope::rules::testing {
namespace {

TEST(Overtraining, FiresWhenTrainingLossStopsImproving) {
  auto rule = MakeRule(OvertrainingRule());
  FakeContext ctx;
  for (int s = 0; s < 400; ++s) {
    double loss = s < 100 ? 2.0 - 0.015 * s : 0.5;
    rule->OnStepData(LossStep(s, loss * (1 + 0.02 * Noise(s))), ctx);
  }
  const Evaluation* v = ctx.FirstViolation();
  ASSERT_NE(v, nullptr);
  // The 50-value mean stops gaining 1 % shortly before it lies in the plateau (step 149);
  // patience_train 100 saved steps later it fires.
  EXPECT_GT(v->step, 200);
  EXPECT_LT(v->step, 260);
  EXPECT_NE(v->message.find("training"), std::string::npos);
}

TEST(Overtraining, ImprovingTrainingDoesNotFire) {
  auto rule = MakeRule(OvertrainingRule());
  FakeContext ctx;
  for (int s = 0; s < 100; ++s) {
    rule->OnStepData(LossStep(s, 3.0 - 0.025 * s + 0.02 * Noise(s)), ctx);
  }
  EXPECT_EQ(ctx.evals.size(), 100u);
  EXPECT_EQ(ctx.Violations(), 0);
}

// Digits-like minibatch noise (±46 % sd) on a loss still falling ~15 % per 60 steps: the
// smoothed loss keeps setting 1 % bests well within patience_train, for every seed.
TEST(Overtraining, HeavyMinibatchNoiseDoesNotFire) {
  int fired = 0;
  for (uint64_t seed = 0; seed < 20; ++seed) {
    auto rule = MakeRule(OvertrainingRule());
    FakeContext ctx;
    for (int s = 0; s < 600; ++s) {
      double loss = 2.0 * std::exp(-s / 250.0) + 0.02;
      rule->OnStepData(LossStep(s, loss * (1 + 0.8 * Noise(seed * 7919 + s))), ctx);
    }
    fired += ctx.Violations() > 0;
  }
  EXPECT_EQ(fired, 0);
}

// SageMaker's absolute delta stays available: 0.1 is more than the whole tail of this loss.
TEST(Overtraining, AbsoluteDelta) {
  auto rule = MakeRule(OvertrainingRule(), {{"delta", "0.1"}, {"patience_train", "20"}});
  FakeContext ctx;
  for (int s = 0; s < 200; ++s) rule->OnStepData(LossStep(s, 0.3 - 0.001 * s), ctx);
  ASSERT_NE(ctx.FirstViolation(), nullptr);
  EXPECT_EQ(ctx.FirstViolation()->step, 49 + 20);
}

TEST(Overtraining, FiresWhenValidationStopsImproving) {
  auto rule = MakeRule(OvertrainingRule(), {{"patience_validation", "3"}});
  FakeContext ctx;
  int64_t step = 0;
  for (int ep = 0; ep < 8; ++ep) {
    for (int i = 0; i < 10; ++i, ++step) rule->OnStepData(LossStep(step, 5.0 - 0.05 * step), ctx);
    double val = ep < 3 ? 2.0 - 0.3 * ep : 1.5;  // stalls from epoch 3
    for (int i = 0; i < 3; ++i, ++step) rule->OnStepData(LossStep(step, val, Mode::kEval), ctx);
  }
  rule->OnEnd(ctx);
  const Evaluation* v = ctx.FirstViolation();
  ASSERT_NE(v, nullptr);
  EXPECT_NE(v->message.find("validation"), std::string::npos);
  EXPECT_EQ(v->step, 5 * 13 + 12);  // phases 3,4,5 no better than 1.4; 3rd one (epoch 5)
  EXPECT_EQ(v->mode, Mode::kEval);
}

}  // namespace
}  // namespace trainscope::rules::testing
