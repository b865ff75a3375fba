#include "rules/profiling/profiling_test_util.h"

namespace trainscope::rules::testing {
namespace {

const std::map<std::string, std::string> kSmall = {{"patience", "20"}, {"window", "20"}};

TEST(BatchSize, FiresWhenEverythingIsLightlyUsed) {
  Harness h("batch_size", kSmall);
  for (int i = 0; i < 30; ++i) {
    h.Sample("monitor-a", kT0 + i * kHalfSecond, NodeSample(40, 30, 20, 0, /*mem=*/15));
  }
  const RuleEventRecord* f = h.FirstFiring();
  ASSERT_NE(f, nullptr);
  EXPECT_TRUE(Contains(f->message, "p95 CPU 25%")) << f->message;
  EXPECT_TRUE(Contains(f->message, "p95 memory 15%")) << f->message;
  EXPECT_EQ(f->value, 40);
}

TEST(BatchSize, FullGpuMemoryDoesNotFire) {
  Harness h("batch_size", kSmall);
  for (int i = 0; i < 60; ++i) {
    h.Sample("monitor-a", kT0 + i * kHalfSecond, NodeSample(40, 30, 20, 0, /*mem=*/85));
  }
  h.Finish();
  EXPECT_EQ(h.Final(), RuleStatus::kNoIssuesFound);
  EXPECT_EQ(h.Info().violations, 0u);
  EXPECT_GT(h.Info().evaluations, 0u);
}

TEST(BatchSize, NoGpuWarns) {
  Harness h("batch_size", kSmall);
  for (int i = 0; i < 30; ++i) h.Sample("monitor-a", kT0 + i * kHalfSecond, NodeSample(-1, 5));
  h.Finish();
  EXPECT_TRUE(h.Warned("no GPU metrics"));
  EXPECT_EQ(h.Info().evaluations, 0u);
}

}  // namespace
}  // namespace trainscope::rules::testing
