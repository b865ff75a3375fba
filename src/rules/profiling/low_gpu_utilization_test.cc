#include "rules/profiling/profiling_test_util.h"

namespace trainscope::rules::testing {
namespace {

const std::map<std::string, std::string> kSmall = {{"patience", "20"}, {"window", "20"}};

TEST(LowGpuUtilization, FiresWhenUnderutilised) {
  Harness h("low_gpu_utilization", kSmall);
  for (int i = 0; i < 30; ++i)
    h.Sample("monitor-a", kT0 + i * kHalfSecond, NodeSample(30 + i % 5, 50));
  const RuleEventRecord* f = h.FirstFiring();
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->threshold, 70);
  EXPECT_LT(f->value, 35);
  EXPECT_EQ(f->tensors, std::vector<std::string>{"gpu0.util"});
  EXPECT_TRUE(Contains(f->message, "underutilised")) << f->message;
}

TEST(LowGpuUtilization, FiresWhenFluctuating) {
  Harness h("low_gpu_utilization", kSmall);
  for (int i = 0; i < 30; ++i) {
    h.Sample("monitor-a", kT0 + i * kHalfSecond, NodeSample(i % 3 == 0 ? 1 : 95, 50));
  }
  const RuleEventRecord* f = h.FirstFiring();
  ASSERT_NE(f, nullptr);
  EXPECT_TRUE(Contains(f->message, "fluctuates")) << f->message;
  EXPECT_EQ(f->threshold, 10);
}

TEST(LowGpuUtilization, BusyGpuDoesNotFire) {
  Harness h("low_gpu_utilization", kSmall);
  for (int i = 0; i < 100; ++i) {
    h.Sample("monitor-a", kT0 + i * kHalfSecond, NodeSample(i == 50 ? 0.5 : 85 + i % 10, 50));
  }
  h.Finish();
  EXPECT_EQ(h.Final(), RuleStatus::kNoIssuesFound);
  EXPECT_EQ(h.Info().violations, 0u);
  EXPECT_EQ(h.Info().evaluations, 81u);
}

TEST(LowGpuUtilization, NoGpuReportsNoDataWithWarning) {
  Harness h("low_gpu_utilization", kSmall);
  for (int i = 0; i < 30; ++i) h.Sample("monitor-a", kT0 + i * kHalfSecond, NodeSample(-1, 50));
  EXPECT_TRUE(h.Warned("no GPU metrics in this run"));
  h.Finish();
  EXPECT_EQ(h.Final(), RuleStatus::kNoData);
}

TEST(LowGpuUtilization, DefaultsWaitForPatience) {
  Harness h("low_gpu_utilization");  // patience 1000 samples
  for (int i = 0; i < 999; ++i) h.Sample("monitor-a", kT0 + i * kHalfSecond, NodeSample(5, 50));
  EXPECT_EQ(h.Info().evaluations, 0u);
  h.Sample("monitor-a", kT0 + 999 * kHalfSecond, NodeSample(5, 50));
  EXPECT_EQ(h.Firings(), 1);
}

}  // namespace
}  // namespace trainscope::rules::testing
