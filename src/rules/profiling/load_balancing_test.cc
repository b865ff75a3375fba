#include "rules/profiling/profiling_test_util.h"

namespace trainscope::rules::testing {
namespace {

Metrics TwoGpus(double u0, double u1) {
  return {{"gpu.count", 2}, {"gpu0.util", u0}, {"gpu1.util", u1}, {"cpu.util", 30}};
}

TEST(LoadBalancing, FiresWhenOneGpuWorksMuchLess) {
  Harness h("load_balancing", {{"patience", "20"}});
  for (int i = 0; i < 30; ++i) {
    h.Sample("monitor-a", kT0 + i * kHalfSecond, TwoGpus(90 + i % 5, 20 + i % 7));
  }
  const RuleEventRecord* f = h.FirstFiring();
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->worker, "gpus");
  EXPECT_GT(f->value, 0.5);
  EXPECT_TRUE(Contains(f->message, "monitor-a/gpu0 and monitor-a/gpu1")) << f->message;
}

TEST(LoadBalancing, ComparesGpusAcrossNodes) {
  Harness h("load_balancing", {{"patience", "20"}});
  for (int i = 0; i < 30; ++i) {
    h.Sample("monitor-a", kT0 + i * kHalfSecond, NodeSample(90 + i % 5, 50));
    h.Sample("monitor-b", kT0 + i * kHalfSecond, NodeSample(10 + i % 5, 50));
  }
  ASSERT_NE(h.FirstFiring(), nullptr);
}

TEST(LoadBalancing, SimilarGpusDoNotFire) {
  Harness h("load_balancing", {{"patience", "20"}});
  for (int i = 0; i < 200; ++i) {
    h.Sample("monitor-a", kT0 + i * kHalfSecond, TwoGpus(80 + i % 15, 80 + (i * 7) % 15));
  }
  h.Finish();
  EXPECT_EQ(h.Final(), RuleStatus::kNoIssuesFound);
  EXPECT_EQ(h.Info().violations, 0u);
  EXPECT_GT(h.Info().evaluations, 100u);
}

TEST(LoadBalancing, FiresWhenOneWorkerIsSlower) {
  Harness h("load_balancing", {{"window", "20"}});
  for (int s = 0; s < 30; ++s) {
    h.Step("worker-0", s, kT0 + s * 100'000, 50'000);
    h.Step("worker-1", s, kT0 + s * 100'000, 90'000 + s % 3);
  }
  const RuleEventRecord* f = h.FirstFiring();
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->worker, "workers");
  EXPECT_NEAR(f->value, 0.8, 0.01);
  EXPECT_TRUE(Contains(f->message, "worker-1 takes 90 ms")) << f->message;
}

TEST(LoadBalancing, EqualWorkersDoNotFire) {
  Harness h("load_balancing", {{"window", "20"}});
  for (int s = 0; s < 100; ++s) {
    h.Step("worker-0", s, kT0 + s * 100'000, 50'000 + (s % 7) * 1000);
    h.Step("worker-1", s, kT0 + s * 100'000, 52'000 + (s % 5) * 1000);
  }
  h.Finish();
  EXPECT_EQ(h.Final(), RuleStatus::kNoIssuesFound);
  EXPECT_GT(h.Info().evaluations, 50u);
  EXPECT_EQ(h.Info().violations, 0u);
}

}  // namespace
}  // namespace trainscope::rules::testing
