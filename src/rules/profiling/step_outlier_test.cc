#include "rules/profiling/profiling_test_util.h"

namespace trainscope::rules::testing {
namespace {

TEST(StepOutlier, FiresOnMoreThanNOutliers) {
  Harness h("step_outlier");
  int64_t t = kT0;
  for (int s = 0; s < 400; ++s) {
    int64_t dur = 10'000 + (s % 7) * 100;
    if (s > 150 && s % 20 == 0) dur = 200'000;  // 12 slow steps up to step 400
    h.Step("worker-0", s, t, dur);
    t += dur;
  }
  const RuleEventRecord* f = h.FirstFiring();
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->worker, "worker-0");
  EXPECT_EQ(f->threshold, 10);
  EXPECT_EQ(f->value, 11);
  EXPECT_TRUE(Contains(f->message, "11 of")) << f->message;
  EXPECT_TRUE(Contains(f->message, "TRAIN steps on worker-0")) << f->message;
  EXPECT_TRUE(Contains(f->message, "max 200 ms")) << f->message;
  EXPECT_TRUE(Contains(f->message, "slowest steps: ")) << f->message;
}

TEST(StepOutlier, SteadyStepsAndFewOutliersDoNotFire) {
  Harness h("step_outlier");
  int64_t t = kT0;
  for (int s = 0; s < 1000; ++s) {
    int64_t dur = 10'000 + static_cast<int64_t>(500 * Noise(s));
    if (s % 200 == 0) dur = 300'000;  // 5 slow steps
    h.Step("worker-0", s, t, dur);
    h.Step("worker-0", s, t, dur * 2, -1, Mode::kEval);
    t += dur;
  }
  h.Finish();
  EXPECT_EQ(h.Final(), RuleStatus::kNoIssuesFound);
  EXPECT_EQ(h.Info().violations, 0u);
  EXPECT_GT(h.Info().evaluations, 1000u);
}

TEST(StepOutlier, ModeSelectsOneMode) {
  Harness h("step_outlier", {{"mode", "EVAL"}, {"n_outliers", "0"}});
  int64_t t = kT0;
  for (int s = 0; s < 200; ++s) {
    h.Step("worker-0", s, t, s == 150 ? 900'000 : 10'000);  // TRAIN outlier: ignored
    t += 1'000'000;
  }
  h.Finish();
  EXPECT_EQ(h.Info().evaluations, 0u);
  EXPECT_EQ(h.Final(), RuleStatus::kNoData);
}

TEST(StepOutlier, NoStepsWarns) {
  Harness h("step_outlier");
  h.Sample("monitor-a", kT0, NodeSample(-1, 5));
  h.Finish();
  EXPECT_TRUE(h.Warned("no step records"));
}

}  // namespace
}  // namespace trainscope::rules::testing
