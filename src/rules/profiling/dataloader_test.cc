#include "rules/profiling/profiling_test_util.h"

namespace trainscope::rules::testing {
namespace {

TEST(Dataloader, FiresWhenStepsWaitForData) {
  Harness h("dataloader");
  for (int i = 0; i < 20; ++i) h.Sample("monitor-a", kT0 + i * kHalfSecond, NodeSample(-1, 50));
  int64_t t = kT0;
  for (int s = 0; s < 100; ++s) {
    h.Step("worker-0", s, t, 22'000, /*wait=*/20'000);  // 20 ms of a 22 ms step
    t += 22'000;
  }
  const RuleEventRecord* f = h.FirstFiring();
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->worker, "worker-0");
  EXPECT_EQ(f->step, 59);  // 10 skipped + a window of 50
  EXPECT_NEAR(f->value, 90.9, 0.1);
  EXPECT_EQ(f->threshold, 25);
  EXPECT_TRUE(Contains(f->message, "20 ms per step, 90.91% of the step time")) << f->message;
  EXPECT_TRUE(Contains(f->message, "0 loader processes besides the main one for 2 cores"))
      << f->message;
}

TEST(Dataloader, FastLoaderDoesNotFire) {
  Harness h("dataloader");
  int64_t t = kT0;
  for (int s = 0; s < 500; ++s) {
    int64_t wait = s < 10 ? 2'000'000 : 300 + s % 50;  // slow start-up is skipped (patience)
    h.Step("worker-0", s, t, 10'000 + wait, wait);
    t += 10'000 + wait;
  }
  h.Finish();
  EXPECT_EQ(h.Final(), RuleStatus::kNoIssuesFound);
  EXPECT_EQ(h.Info().violations, 0u);
  EXPECT_EQ(h.Info().evaluations, 441u);
}

TEST(Dataloader, FiresOnTooManyLoaderProcesses) {
  Harness h("dataloader");
  for (int i = 0; i < 30; ++i) {
    Metrics m = NodeSample(-1, 50);
    for (auto& [k, v] : m) {
      if (k == "proc.count") v = 9;  // 8 workers on 2 cores
    }
    h.Sample("monitor-a", kT0 + i * kHalfSecond, m);
  }
  const RuleEventRecord* f = h.FirstFiring();
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->worker, "monitor-a/processes");
  EXPECT_EQ(f->value, 8);
  EXPECT_EQ(f->threshold, 4);
}

TEST(Dataloader, WithoutDataWaitWarns) {
  Harness h("dataloader");
  for (int s = 0; s < 100; ++s) h.Step("worker-0", s, kT0 + s * 10'000, 10'000);
  h.Finish();
  EXPECT_TRUE(h.Warned("no data-wait times recorded"));
  EXPECT_EQ(h.Final(), RuleStatus::kNoData);
}

}  // namespace
}  // namespace trainscope::rules::testing
