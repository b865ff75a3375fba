#include <cmath>

#include "rules/builtin/rule_test_util.h"

namespace trainscope::rules::testing {
namespace {

// SageMaker's 2019 example: losses 0.30, 0.33, 0.31, 0.30, 0.28 at steps 0, 4, ..., 16 with
// num_steps=10 and window=1 (literal two-sample logic) fire at step 12 (0.30 vs 0.30 at step 0).
TEST(LossNotDecreasing, SageMakerExampleWithWindowOne) {
  auto rule = MakeRule(LossNotDecreasingRule(), {{"window", "1"}});
  FakeContext ctx;
  std::vector<double> losses = {0.30, 0.33, 0.31, 0.30, 0.28};
  for (size_t i = 0; i < losses.size(); ++i) rule->OnStepData(LossStep(4 * i, losses[i]), ctx);
  const Evaluation* v = ctx.FirstViolation();
  ASSERT_NE(v, nullptr);
  EXPECT_EQ(v->step, 12);
  EXPECT_DOUBLE_EQ(v->value, 0.30);
}

TEST(LossNotDecreasing, FiresOnPlateau) {
  auto rule = MakeRule(LossNotDecreasingRule());
  FakeContext ctx;
  for (int s = 0; s < 200; ++s) {
    double loss = s < 100 ? 2.0 * std::exp(-s / 30.0) * (1 + 0.02 * Noise(s)) : 0.2;
    rule->OnStepData(LossStep(s, loss), ctx);
  }
  const Evaluation* v = ctx.FirstViolation();
  ASSERT_NE(v, nullptr);
  EXPECT_GE(v->step, 100);
  EXPECT_LE(v->step, 160);  // once the current window lies in the plateau
}

// A healthy, noisy minibatch loss (5% noise, decreasing) must not fire with the defaults.
TEST(LossNotDecreasing, NoisyHealthyTrainingDoesNotFire) {
  auto rule = MakeRule(LossNotDecreasingRule());
  FakeContext ctx;
  for (int s = 0; s < 400; ++s) {
    double loss = 2.3 * std::exp(-s / 150.0) + 0.3;
    rule->OnStepData(LossStep(s, loss * (1 + 0.05 * Noise(s))), ctx);
  }
  EXPECT_GT(ctx.evals.size(), 25u);
  EXPECT_EQ(ctx.Violations(), 0);
}

// Like the digits example: minibatch losses scatter ±46 % (sd) around a curve that falls ~15 %
// per 60 steps late in training. Two means of 60 such values differ by ~8 % sd, below the
// healthy decrease, so no seed may fire; a frozen model (±1 % noise) fires at the first check.
TEST(LossNotDecreasing, HeavyMinibatchNoiseDoesNotFireButFrozenDoes) {
  int fired = 0;
  for (uint64_t seed = 0; seed < 20; ++seed) {
    auto rule = MakeRule(LossNotDecreasingRule());
    FakeContext ctx;
    for (int s = 0; s < 600; ++s) {
      double loss = 2.0 * std::exp(-s / 250.0) + 0.02;
      rule->OnStepData(LossStep(s, loss * (1 + 0.8 * Noise(seed * 7919 + s))), ctx);
    }
    fired += ctx.Violations() > 0;
  }
  EXPECT_EQ(fired, 0);
  auto frozen = MakeRule(LossNotDecreasingRule());
  FakeContext ctx;
  for (int s = 0; s < 600; ++s) frozen->OnStepData(LossStep(s, 2.3 * (1 + 0.01 * Noise(s))), ctx);
  ASSERT_NE(ctx.FirstViolation(), nullptr);
  EXPECT_EQ(ctx.FirstViolation()->step, 119);  // first check: 2 x window saved values
}

TEST(LossNotDecreasing, FiresOnIncrease) {
  auto rule = MakeRule(LossNotDecreasingRule());
  FakeContext ctx;
  for (int s = 0; s < 200; ++s) rule->OnStepData(LossStep(s, 1.0 + s * 0.05), ctx);
  ASSERT_NE(ctx.FirstViolation(), nullptr);
  EXPECT_EQ(ctx.FirstViolation()->tensors, std::vector<std::string>{"losses/loss"});
}

TEST(LossNotDecreasing, ModeFilter) {
  auto rule = MakeRule(LossNotDecreasingRule(), {{"mode", "EVAL"}});
  FakeContext ctx;
  for (int s = 0; s < 150; ++s) rule->OnStepData(LossStep(s, 1.0), ctx);  // TRAIN plateau
  EXPECT_TRUE(ctx.evals.empty());
}

TEST(LossNotDecreasing, EvalBatchesIgnoredByDefault) {
  auto rule = MakeRule(LossNotDecreasingRule());
  FakeContext ctx;
  for (int s = 0; s < 150; ++s) rule->OnStepData(LossStep(s, 1.0, Mode::kEval), ctx);
  EXPECT_TRUE(ctx.evals.empty());
  auto global = MakeRule(LossNotDecreasingRule(), {{"mode", "GLOBAL"}});
  for (int s = 0; s < 150; ++s) global->OnStepData(LossStep(s, 1.0, Mode::kEval), ctx);
  EXPECT_GT(ctx.Violations(), 0);
}

// Many seeds of a healthy noisy loss: the default settings must stay quiet on all of them.
TEST(LossNotDecreasing, NoFalseAlarmsAcrossSeeds) {
  int fired = 0;
  for (uint64_t seed = 0; seed < 50; ++seed) {
    auto rule = MakeRule(LossNotDecreasingRule());
    FakeContext ctx;
    for (int s = 0; s < 300; ++s) {
      double loss = 2.3 * std::exp(-s / 100.0) + 0.2;
      rule->OnStepData(LossStep(s, loss * (1 + 0.05 * Noise(seed * 100000 + s))), ctx);
    }
    fired += ctx.Violations() > 0;
  }
  EXPECT_EQ(fired, 0);
}

TEST(LossNotDecreasing, BadModeIsAnError) {
  auto t = LossNotDecreasingRule();
  auto p = RuleParams::Parse(t.name, t.params, {{"mode", "TRAINING"}});
  ASSERT_TRUE(p.ok());
  EXPECT_FALSE(t.create(p.value()).ok());
}

}  // namespace
}  // namespace trainscope::rules::testing
