#include "rules/builtin/rule_test_util.h"

namespace trainscope::rules::testing {
namespace {

TEST(AllZero, FiresOnAllZeroTensor) {
  auto rule = MakeRule(AllZeroRule(), {{"collection_names", "gradients,weights"}});
  FakeContext ctx;
  StepData d = Step(4);
  d.summaries.push_back(Summary("gradients/fc1.weight", 4, {0, 0, 0, 0}));
  d.summaries.push_back(Summary("weights/fc1.weight", 4, {0, 1, 0, 0}));
  rule->OnStepData(d, ctx);
  ASSERT_EQ(ctx.evals.size(), 1u);
  EXPECT_TRUE(ctx.evals[0].violated);
  EXPECT_EQ(ctx.evals[0].tensors, std::vector<std::string>{"gradients/fc1.weight"});
}

TEST(AllZero, ThresholdBelowHundred) {
  auto rule = MakeRule(AllZeroRule(), {{"tensor_regex", "weights"}, {"threshold", "75"}});
  FakeContext ctx;
  StepData d = Step(4);
  d.summaries.push_back(Summary("weights/fc1.weight", 4, {0, 1, 0, 0}));
  rule->OnStepData(d, ctx);
  ASSERT_EQ(ctx.evals.size(), 1u);
  EXPECT_TRUE(ctx.evals[0].violated);
  EXPECT_DOUBLE_EQ(ctx.evals[0].value, 75);
}

TEST(AllZero, NonZeroDoesNotFire) {
  auto rule = MakeRule(AllZeroRule(), {{"collection_names", "weights"}});
  FakeContext ctx;
  StepData d = Step(4);
  d.summaries.push_back(Summary("weights/fc1.weight", 4, {0, 1, 0, 0}));
  rule->OnStepData(d, ctx);
  ASSERT_EQ(ctx.evals.size(), 1u);
  EXPECT_FALSE(ctx.evals[0].violated);
}

TEST(AllZero, NeedsASelection) {
  auto t = AllZeroRule();
  auto p = RuleParams::Parse(t.name, t.params, {});
  auto r = t.create(p.value());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("collection_names or tensor_regex"), std::string::npos);
}

}  // namespace
}  // namespace trainscope::rules::testing
