#include "rules/profiling/profiling_test_util.h"

namespace trainscope::rules::testing {
namespace {

const std::map<std::string, std::string> kSmall = {{"patience", "20"}};  // window 10

TEST(GpuMemoryIncrease, FiresOnAJump) {
  Harness h("gpu_memory_increase", kSmall);
  for (int i = 0; i < 40; ++i) {
    double mem = i < 30 ? 40 : 52;  // +12 points
    h.Sample("monitor-a", kT0 + i * kHalfSecond, NodeSample(90, 50, 10, 0, mem));
  }
  const RuleEventRecord* f = h.FirstFiring();
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->threshold, 5);
  EXPECT_GT(f->value, 5);
  EXPECT_TRUE(Contains(f->message, "memory rose from 40%")) << f->message;
  EXPECT_TRUE(Contains(f->message, "80 GiB")) << f->message;
}

TEST(GpuMemoryIncrease, StableOrSlowlyVaryingMemoryDoesNotFire) {
  Harness h("gpu_memory_increase", kSmall);
  for (int i = 0; i < 200; ++i) {
    double mem = 60 + 2 * std::sin(i / 10.0);
    h.Sample("monitor-a", kT0 + i * kHalfSecond, NodeSample(90, 50, 10, 0, mem));
  }
  h.Finish();
  EXPECT_EQ(h.Final(), RuleStatus::kNoIssuesFound);
  EXPECT_EQ(h.Info().violations, 0u);
  EXPECT_GT(h.Info().evaluations, 100u);
}

TEST(GpuMemoryIncrease, NoGpuWarns) {
  Harness h("gpu_memory_increase", kSmall);
  for (int i = 0; i < 5; ++i) h.Sample("monitor-a", kT0 + i * kHalfSecond, NodeSample(-1, 50));
  h.Finish();
  EXPECT_TRUE(h.Warned("no GPU metrics"));
  EXPECT_EQ(h.Final(), RuleStatus::kNoData);
}

}  // namespace
}  // namespace trainscope::rules::testing
