#include "rules/profiling/profiling_test_util.h"

namespace trainscope::rules::testing {
namespace {

TEST(CpuBottleneck, FiresWhenGpuIdlesWhileACoreIsSaturated) {
  Harness h("cpu_bottleneck", {{"patience", "20"}});
  h.Step("worker-0", 7, kT0, 1000);
  for (int i = 0; i < 5; ++i) h.Sample("monitor-a", kT0 + i * kHalfSecond, NodeSample(95, 50));
  for (int i = 5; i < 40; ++i) h.Sample("monitor-a", kT0 + i * kHalfSecond, NodeSample(3, 99));
  const RuleEventRecord* f = h.FirstFiring();
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->worker, "monitor-a");
  EXPECT_EQ(f->step, 7);
  EXPECT_EQ(f->threshold, 50);
  EXPECT_GT(f->value, 50);
  EXPECT_TRUE(Contains(f->message, "busiest core 99%")) << f->message;
  EXPECT_TRUE(Contains(f->message, "GPU 3%")) << f->message;
  h.Finish();
  EXPECT_EQ(h.Final(), RuleStatus::kIssuesFound);
}

TEST(CpuBottleneck, BusyGpuOrShortSpikesDoNotFire) {
  Harness h("cpu_bottleneck", {{"patience", "20"}});
  for (int i = 0; i < 100; ++i) {
    // Busy CPU with a busy GPU is healthy; 20 % of samples bottlenecked stays below 50 %.
    double gpu = i % 5 == 0 ? 2 : 90;
    h.Sample("monitor-a", kT0 + i * kHalfSecond, NodeSample(gpu, 99));
  }
  h.Finish();
  EXPECT_EQ(h.Final(), RuleStatus::kNoIssuesFound);
  EXPECT_EQ(h.Info().violations, 0u);
  EXPECT_GT(h.Info().evaluations, 0u);
}

TEST(CpuBottleneck, NoGpuWarnsAndNeverFires) {
  Harness h("cpu_bottleneck", {{"patience", "5"}});
  for (int i = 0; i < 50; ++i) h.Sample("monitor-a", kT0 + i * kHalfSecond, NodeSample(-1, 100));
  EXPECT_TRUE(h.Warned("no GPU metrics in this run"));
  h.Finish();
  EXPECT_EQ(h.Final(), RuleStatus::kNoData);
  EXPECT_EQ(h.Info().violations, 0u);
}

TEST(CpuBottleneck, UnusedGpuIsNotJudged) {
  Harness h("cpu_bottleneck", {{"patience", "5"}});
  // A CPU training on a machine with an idle GPU: the GPU is never used, so no datapoints.
  for (int i = 0; i < 50; ++i) h.Sample("monitor-a", kT0 + i * kHalfSecond, NodeSample(0, 100));
  h.Finish();
  EXPECT_EQ(h.Final(), RuleStatus::kNoData);
  EXPECT_EQ(h.Info().evaluations, 0u);
  EXPECT_TRUE(h.Warned("did not use them"));
}

TEST(CpuBottleneck, RejectsBadParameters) {
  RuleRegistry r;
  ASSERT_TRUE(AddProfilingRules(&r).ok());
  RuleConfig c;
  c.type = "cpu_bottleneck";
  c.params = {{"cpu_threshold", "150"}};
  RuleEngineOptions o;
  o.sink = [](const RuleEventRecord&) {};
  o.registry = &r;
  auto e = RuleEngine::Create({c}, std::move(o));
  EXPECT_FALSE(e.ok());
}

}  // namespace
}  // namespace trainscope::rules::testing
