#include "rules/profiling/profiling_test_util.h"

namespace trainscope::rules::testing {
namespace {

constexpr int64_t kMinute = 60'000'000;

TEST(MaxInitializationTime, FiresWhileNoStepArrives) {
  Harness h("max_initialization_time", {{"threshold", "2"}});
  for (int i = 0; i <= 5 * 60; ++i) h.Sample("monitor-a", kT0 + i * 1'000'000, NodeSample(-1, 5));
  const RuleEventRecord* f = h.FirstFiring();
  ASSERT_NE(f, nullptr);
  EXPECT_NEAR(f->value, 2.0, 0.02);
  EXPECT_EQ(f->threshold, 2);
  EXPECT_TRUE(Contains(f->message, "no training step after")) << f->message;
  // The first step arrives late: same violation continued, not a second firing.
  h.Step("worker-0", 0, kT0 + 6 * kMinute, 1000);
  h.Finish();
  EXPECT_EQ(h.Firings(), 1);
  EXPECT_EQ(h.Final(), RuleStatus::kIssuesFound);
}

TEST(MaxInitializationTime, FiresOnALateFirstStepReadBeforeTheSamples) {
  Harness h("max_initialization_time", {{"threshold", "2"}});
  h.Step("worker-0", 0, kT0 + 3 * kMinute, 1000);  // read first (another stream)
  EXPECT_EQ(h.FirstFiring(), nullptr);
  h.Sample("monitor-a", kT0, NodeSample(-1, 5));
  const RuleEventRecord* f = h.FirstFiring();
  ASSERT_NE(f, nullptr);
  EXPECT_NEAR(f->value, 3.0, 1e-9);
  EXPECT_EQ(f->worker, "worker-0");
  EXPECT_TRUE(Contains(f->message, "initialization took 3 min")) << f->message;
}

TEST(MaxInitializationTime, QuickStartDoesNotFire) {
  Harness h("max_initialization_time");
  h.Sample("monitor-a", kT0, NodeSample(-1, 5));
  h.Step("worker-0", 0, kT0 + 5'000'000, 1000);
  for (int i = 1; i < 100; ++i) h.Sample("monitor-a", kT0 + i * kMinute, NodeSample(-1, 5));
  h.Finish();
  EXPECT_EQ(h.Info().evaluations, 1u);
  EXPECT_EQ(h.Final(), RuleStatus::kNoIssuesFound);
}

TEST(MaxInitializationTime, WithoutSamplesCountsFromTheFirstTick) {
  Harness h("max_initialization_time", {{"threshold", "1"}});
  h.Tick(kT0);
  h.Tick(kT0 + kMinute / 2);
  EXPECT_EQ(h.FirstFiring(), nullptr);
  h.Tick(kT0 + 2 * kMinute);
  ASSERT_NE(h.FirstFiring(), nullptr);
}

TEST(MaxInitializationTime, RunWithoutStepsWarnsAtTheEnd) {
  Harness h("max_initialization_time");
  h.Sample("monitor-a", kT0, NodeSample(-1, 5));
  h.Sample("monitor-a", kT0 + kMinute, NodeSample(-1, 5));
  h.Finish();
  EXPECT_TRUE(h.Warned("ended before its first training step after 1 min"));
  EXPECT_EQ(h.Final(), RuleStatus::kNoData);
}

}  // namespace
}  // namespace trainscope::rules::testing
