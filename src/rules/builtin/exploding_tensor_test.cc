#include "rules/builtin/amp_scalars.h"
#include "rules/builtin/rule_test_util.h"

namespace trainscope::rules::testing {
namespace {

TEST(ExplodingTensor, FiresOnNanAndInf) {
  auto rule = MakeRule(ExplodingTensorRule());
  FakeContext ctx;
  StepData d = Step(3);
  d.summaries.push_back(Summary("gradients/a", 3, {1, NAN, INFINITY}));
  d.summaries.push_back(Summary("gradients/b", 3, {1, 2}));
  rule->OnStepData(d, ctx);
  ASSERT_EQ(ctx.evals.size(), 1u);
  EXPECT_TRUE(ctx.evals[0].violated);
  EXPECT_EQ(ctx.evals[0].value, 2);
  EXPECT_EQ(ctx.evals[0].tensors, std::vector<std::string>{"gradients/a"});
  EXPECT_EQ(ctx.evals[0].message, "gradients/a has 1 NaN, 1 +Inf value(s)");
}

TEST(ExplodingTensor, OnlyNanIgnoresInf) {
  auto rule = MakeRule(ExplodingTensorRule(), {{"only_nan", "true"}});
  FakeContext ctx;
  StepData d = Step(3);
  d.summaries.push_back(Summary("gradients/a", 3, {1, INFINITY}));
  rule->OnStepData(d, ctx);
  ASSERT_EQ(ctx.evals.size(), 1u);
  EXPECT_FALSE(ctx.evals[0].violated);
}

TEST(ExplodingTensor, NanLossScalarFires) {
  auto rule = MakeRule(ExplodingTensorRule(), {{"collection_names", "losses"}});
  FakeContext ctx;
  rule->OnStepData(LossStep(1, 0.5), ctx);
  rule->OnStepData(LossStep(2, NAN), ctx);
  ASSERT_EQ(ctx.evals.size(), 2u);
  EXPECT_FALSE(ctx.evals[0].violated);
  EXPECT_TRUE(ctx.evals[1].violated);
  EXPECT_EQ(rule->Selectors().size(), 1u);
  // says what happened, not "value 1 > threshold 0"
  EXPECT_NE(ctx.evals[1].message.find(" is NaN"), std::string::npos) << ctx.evals[1].message;
}

TEST(ExplodingTensor, RegexLimitsSelection) {
  auto rule = MakeRule(ExplodingTensorRule(), {{"tensor_regex", "fc2"}});
  FakeContext ctx;
  StepData d = Step(3);
  d.summaries.push_back(Summary("gradients/fc1", 3, {NAN}));
  d.summaries.push_back(Summary("gradients/fc2", 3, {1.0}));
  rule->OnStepData(d, ctx);
  ASSERT_EQ(ctx.evals.size(), 1u);
  EXPECT_FALSE(ctx.evals[0].violated);
}

TEST(ExplodingTensor, GradientsOfAStepTheGradScalerSkippedAreNotInspected) {
  auto rule = MakeRule(ExplodingTensorRule());
  FakeContext ctx;
  StepData d = Step(3);
  d.summaries.push_back(Summary("gradients/a", 3, {1, INFINITY, NAN}));
  d.scalars.push_back(Scalar("losses/loss", 3, 0.5));
  d.scalars.push_back(Scalar(kAmpSkipped, 3, 1));
  rule->OnStepData(d, ctx);
  ASSERT_EQ(ctx.evals.size(), 1u);  // the loss was still inspected
  EXPECT_FALSE(ctx.evals[0].violated);

  StepData w = Step(4);  // the same gradients on a step the scaler did not skip
  w.summaries.push_back(Summary("gradients/a", 4, {1, INFINITY, NAN}));
  w.scalars.push_back(Scalar(kAmpSkipped, 4, 0));
  rule->OnStepData(w, ctx);
  ASSERT_EQ(ctx.evals.size(), 2u);
  EXPECT_TRUE(ctx.evals[1].violated);

  StepData n = Step(5);  // a skipped step with a non-finite loss still fires
  n.summaries.push_back(Summary("gradients/a", 5, {INFINITY}));
  n.scalars.push_back(Scalar("losses/loss", 5, NAN));
  n.scalars.push_back(Scalar(kAmpSkipped, 5, 1));
  rule->OnStepData(n, ctx);
  ASSERT_EQ(ctx.evals.size(), 3u);
  EXPECT_TRUE(ctx.evals[2].violated);
  EXPECT_EQ(ctx.evals[2].tensors, std::vector<std::string>{"losses/loss"});
}

}  // namespace
}  // namespace trainscope::rules::testing
