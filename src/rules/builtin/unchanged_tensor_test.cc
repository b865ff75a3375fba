#include "rules/builtin/rule_test_util.h"

namespace trainscope::rules::testing {
namespace {

StepData RawStep(FakeContext* ctx, int64_t step, const std::vector<double>& v) {
  ctx->AddRaw(RawF32("weights/emb", step, {static_cast<int64_t>(v.size())}, v));
  StepData d = Step(step);
  d.raw.push_back("weights/emb");
  d.summaries.push_back(Summary("weights/emb", step, v));  // raw wins over the summary
  return d;
}

TEST(UnchangedTensor, FiresOnUnchangedRaw) {
  auto rule = MakeRule(UnchangedTensorRule(), {{"collection_names", "weights"}});
  FakeContext ctx;
  for (int s = 0; s < 3; ++s) rule->OnStepData(RawStep(&ctx, s * 10, {1, 2, 3}), ctx);
  ASSERT_EQ(ctx.evals.size(), 1u);  // first verdict once 3 steps exist
  EXPECT_TRUE(ctx.evals[0].violated);
  EXPECT_NE(ctx.evals[0].message.find("element-wise"), std::string::npos);
}

TEST(UnchangedTensor, ChangingRawDoesNotFire) {
  auto rule = MakeRule(UnchangedTensorRule(), {{"collection_names", "weights"}});
  FakeContext ctx;
  for (int s = 0; s < 6; ++s) rule->OnStepData(RawStep(&ctx, s, {1, 2, 3.0 + 0.01 * s}), ctx);
  EXPECT_EQ(ctx.evals.size(), 4u);
  EXPECT_EQ(ctx.Violations(), 0);
}

TEST(UnchangedTensor, SameMomentsButDifferentElementsIsChangedWithRaw) {
  auto rule = MakeRule(UnchangedTensorRule(), {{"collection_names", "weights"}});
  FakeContext ctx;
  rule->OnStepData(RawStep(&ctx, 0, {1, 2, 3}), ctx);
  rule->OnStepData(RawStep(&ctx, 1, {3, 2, 1}), ctx);
  rule->OnStepData(RawStep(&ctx, 2, {1, 2, 3}), ctx);
  ASSERT_EQ(ctx.evals.size(), 1u);
  EXPECT_FALSE(ctx.evals[0].violated);
}

TEST(UnchangedTensor, FallsBackToSummaries) {
  auto rule = MakeRule(UnchangedTensorRule(), {{"tensor_regex", "fc1"}, {"num_steps", "2"}});
  FakeContext ctx;
  for (int s = 0; s < 2; ++s) {
    StepData d = Step(s);
    d.summaries.push_back(Summary("weights/fc1", s, {0.5, -0.25}));
    rule->OnStepData(d, ctx);
  }
  ASSERT_EQ(ctx.evals.size(), 1u);
  EXPECT_TRUE(ctx.evals[0].violated);
  EXPECT_NE(ctx.evals[0].message.find("summary"), std::string::npos);
}

}  // namespace
}  // namespace trainscope::rules::testing
