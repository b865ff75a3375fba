#include "rules/builtin/rule_test_util.h"

namespace trainscope::rules::testing {
namespace {

// A batch of 4 NCHW images (3 channels, 2x2) with per-channel value base[c] + noise.
StepData Images(FakeContext* ctx, int64_t step, std::vector<double> base) {
  std::vector<double> v;
  for (int n = 0; n < 4; ++n) {
    for (int c = 0; c < 3; ++c) {
      for (int i = 0; i < 4; ++i) v.push_back(base[c] + 0.5 * Noise(step * 100 + n * 10 + i));
    }
  }
  ctx->AddRaw(RawF32("inputs/conv1", step, {4, 3, 2, 2}, v));
  StepData d = Step(step);
  d.raw.push_back("inputs/conv1");
  return d;
}

TEST(CheckInputImages, FiresOnUnnormalisedImages) {
  auto rule = MakeRule(CheckInputImagesRule(), {{"threshold_samples", "8"}});
  FakeContext ctx;
  rule->OnStepData(Images(&ctx, 0, {0.45, 0.45, 0.45}), ctx);  // raw [0,1] pixels
  EXPECT_TRUE(ctx.evals.empty());                              // 4 < 8 images
  rule->OnStepData(Images(&ctx, 1, {0.45, 0.45, 0.45}), ctx);
  ASSERT_EQ(ctx.evals.size(), 1u);
  EXPECT_TRUE(ctx.evals[0].violated);
  EXPECT_GT(ctx.evals[0].value, 0.2);
}

TEST(CheckInputImages, NormalisedImagesDoNotFire) {
  auto rule = MakeRule(CheckInputImagesRule(), {{"threshold_samples", "8"}});
  FakeContext ctx;
  for (int s = 0; s < 4; ++s) rule->OnStepData(Images(&ctx, s, {0.0, 0.05, -0.05}), ctx);
  EXPECT_EQ(ctx.evals.size(), 3u);
  EXPECT_EQ(ctx.Violations(), 0);
}

TEST(CheckInputImages, ChannelAxisMatters) {
  auto rule = MakeRule(CheckInputImagesRule(), {{"threshold_samples", "4"}, {"channel", "1"}});
  FakeContext ctx;
  rule->OnStepData(Images(&ctx, 0, {1.0, 0.0, 0.0}), ctx);  // only channel 0 is off
  ASSERT_EQ(ctx.evals.size(), 1u);
  EXPECT_TRUE(ctx.evals[0].violated);
  EXPECT_NE(ctx.evals[0].message.find("channel 0"), std::string::npos);
}

}  // namespace
}  // namespace trainscope::rules::testing
