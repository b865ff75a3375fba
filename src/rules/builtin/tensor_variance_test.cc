#include "rules/builtin/rule_test_util.h"

namespace trainscope::rules::testing {
namespace {

TEST(TensorVariance, FiresAboveMax) {
  auto rule =
      MakeRule(TensorVarianceRule(), {{"collection_names", "weights"}, {"max_threshold", "10"}});
  FakeContext ctx;
  StepData d = Step(1);
  d.summaries.push_back(Summary("weights/a", 1, {5, -5}));      // var 25
  d.summaries.push_back(Summary("weights/b", 1, {1, -1}));      // var 1
  d.summaries.push_back(Summary("gradients/a", 1, {50, -50}));  // not selected
  rule->OnStepData(d, ctx);
  ASSERT_EQ(ctx.evals.size(), 1u);
  EXPECT_TRUE(ctx.evals[0].violated);
  EXPECT_EQ(ctx.evals[0].tensors, std::vector<std::string>{"weights/a"});
  EXPECT_DOUBLE_EQ(ctx.evals[0].value, 25);
}

TEST(TensorVariance, FiresBelowMinAndNotInside) {
  auto rule =
      MakeRule(TensorVarianceRule(),
               {{"tensor_regex", "^weights/"}, {"min_threshold", "0.5"}, {"max_threshold", "100"}});
  FakeContext ctx;
  StepData d = Step(1);
  d.summaries.push_back(Summary("weights/a", 1, {1, -1}));
  rule->OnStepData(d, ctx);
  StepData d2 = Step(2);
  d2.summaries.push_back(Summary("weights/a", 2, {0.1, -0.1}));
  rule->OnStepData(d2, ctx);
  ASSERT_EQ(ctx.evals.size(), 2u);
  EXPECT_FALSE(ctx.evals[0].violated);
  EXPECT_TRUE(ctx.evals[1].violated);
}

TEST(TensorVariance, NeedsSelectionAndThreshold) {
  auto t = TensorVarianceRule();
  auto p1 = RuleParams::Parse(t.name, t.params, {{"max_threshold", "1"}});
  EXPECT_FALSE(t.create(p1.value()).ok());
  auto p2 = RuleParams::Parse(t.name, t.params, {{"tensor_regex", "w"}});
  EXPECT_FALSE(t.create(p2.value()).ok());
}

}  // namespace
}  // namespace trainscope::rules::testing
