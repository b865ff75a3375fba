#include "rules/profiling/profiling_test_util.h"

namespace trainscope::rules::testing {
namespace {

TEST(IoBottleneck, FiresWhenGpuIdlesWhileWaitingForIo) {
  Harness h("io_bottleneck", {{"patience", "10"}});
  h.Sample("monitor-a", kT0, NodeSample(90, 20));
  for (int i = 1; i < 30; ++i) {
    h.Sample("monitor-a", kT0 + i * kHalfSecond, NodeSample(1, 20, 10, /*iowait=*/70));
  }
  const RuleEventRecord* f = h.FirstFiring();
  ASSERT_NE(f, nullptr);
  EXPECT_TRUE(Contains(f->message, "I/O wait 70%")) << f->message;
  EXPECT_GT(f->value, 50);
}

TEST(IoBottleneck, LowIowaitDoesNotFire) {
  Harness h("io_bottleneck", {{"patience", "10"}});
  for (int i = 0; i < 60; ++i) {
    h.Sample("monitor-a", kT0 + i * kHalfSecond, NodeSample(i ? 1 : 50, 20, 10, /*iowait=*/5));
  }
  h.Finish();
  EXPECT_EQ(h.Final(), RuleStatus::kNoIssuesFound);
  EXPECT_EQ(h.Info().violations, 0u);
}

TEST(IoBottleneck, NoGpuWarns) {
  Harness h("io_bottleneck");
  h.Sample("monitor-a", kT0, NodeSample(-1, 20, 10, 90));
  h.Finish();
  EXPECT_TRUE(h.Warned("no GPU metrics"));
  EXPECT_EQ(h.Final(), RuleStatus::kNoData);
}

}  // namespace
}  // namespace trainscope::rules::testing
