#include "rules/builtin/rule_test_util.h"

namespace trainscope::rules::testing {
namespace {

TEST(Overtraining, FiresWhenTrainingLossStopsImproving) {
  auto rule = MakeRule(OvertrainingRule());
  FakeContext ctx;
  for (int s = 0; s < 40; ++s) {
    double loss = s < 20 ? 2.0 - 0.08 * s : 0.4 + 0.002 * Noise(s);
    rule->OnStepData(LossStep(s, loss), ctx);
  }
  const Evaluation* v = ctx.FirstViolation();
  ASSERT_NE(v, nullptr);
  EXPECT_GT(v->step, 20);
  EXPECT_LT(v->step, 32);
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
