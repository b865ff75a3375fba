#include <gtest/gtest.h>

#include "report/test_runs.h"
#include "trainscope/report.h"

namespace trainscope {
namespace {

using testing::MakeSyntheticRun;
using testing::SyntheticOptions;

CostInput Price(double usd) {
  CostInput c;
  c.price_per_hour = usd;
  c.price_source = "test";
  return c;
}

SyntheticOptions Kind(const std::string& kind) {
  SyntheticOptions o;
  o.kind = kind;
  return o;
}

TEST(AnalyzeTest, FaultyRunTimelineFindingsAndCost) {
  RunData d = MakeSyntheticRun(Kind("faulty"));
  RunAnalysis a = Analyze(d, Price(3.6));
  EXPECT_EQ(a.steps, 3000);
  EXPECT_DOUBLE_EQ(a.init_s, 20.0);
  EXPECT_DOUBLE_EQ(a.final_s, 5.0);
  EXPECT_NEAR(a.init_s + a.loop_s + a.final_s, a.duration_s, 1e-6);
  // Findings: critical first, then by time.
  ASSERT_EQ(a.findings.size(), 4u);
  EXPECT_EQ(a.findings[0].rule, "exploding_tensor");
  EXPECT_EQ(a.findings[1].rule, "dataloader");
  EXPECT_EQ(a.findings[2].rule, "vanishing_gradient");
  EXPECT_EQ(a.findings[3].rule, "step_outlier");
  EXPECT_EQ(a.rules_clean, std::vector<std::string>{"loss_not_decreasing"});
  // Cost: $3.60/h = $0.001 per second.
  ASSERT_TRUE(a.cost.available);
  EXPECT_NEAR(a.cost.total_usd, a.duration_s * 0.001, 1e-9);
  EXPECT_NEAR(a.cost.gpu_idle_usd, a.cost.total_usd * a.m.gpu_idle_share, 1e-9);
  // The first finding that makes further training worthless is vanishing_gradient (step 400);
  // the earlier dataloader finding is a performance issue, not a reason to stop.
  EXPECT_EQ(a.cost.first_finding_rule, "vanishing_gradient");
  EXPECT_NEAR(a.cost.after_first_finding_usd,
              (a.end_us - d.steps["worker-0"][400].end_us) / 1e6 * 0.001, 1e-9);
  // Step time: phases and outliers (every 500th step has a 0.9 s hiccup).
  EXPECT_EQ(a.outlier_count, 6);
  EXPECT_EQ(a.outlier_steps.front(), 499);
  ASSERT_EQ(a.phase_share.size(), 5u);
  EXPECT_EQ(a.phase_share[0].first, "data_wait");
  EXPECT_GT(a.phase_share[0].second, 0.25);
  EXPECT_LT(a.phase_share[0].second, 0.40);
  // Measurements.
  EXPECT_EQ(a.m.gpu_count, 1);
  EXPECT_EQ(a.m.cpu_cores, 8);
  EXPECT_EQ(a.m.num_workers, 2);
  EXPECT_EQ(a.m.pin_memory, 0);
  EXPECT_GT(a.m.gpu_idle_share, 0.4);
  EXPECT_GT(a.m.cpu_util_p95, 90);
  // Events.
  EXPECT_EQ(a.events.checkpoints, 3);
  EXPECT_NEAR(a.events.checkpoint_total_s, 2.55, 1e-9);
  EXPECT_EQ(a.events.preemptions, 1);
  EXPECT_EQ(a.events.resumes, 1);
  EXPECT_GT(a.events.lost_s, 0);
  // Tensor health: NaN gradients after the explosion.
  EXPECT_GT(a.health["gradients"].first, 0u);
  // Advice: the GPU is starved by the CPU.
  ASSERT_FALSE(a.advice.empty());
  EXPECT_EQ(a.advice[0].kind, "fix_input_pipeline");
  ASSERT_EQ(a.profiles.size(), 1u);
}

TEST(AnalyzeTest, WhereTheNanBeganIsTheEvidenceOfTheNanFinding) {
  RunData d = MakeSyntheticRun(Kind("faulty"));
  Finding plain = Analyze(d, Price(3.6)).findings[0];
  std::string before = plain.evidence;
  // the hook's nonfinite_origin event (python/trainscope/_nan_origin.py); the first one counts
  d.events.push_back({"nonfinite_origin", d.end_us - 2,
                      R"j({"step": 2400, "direction": "forward", "module": "enc.2",)j"
                      R"j( "op": "torch.log",)j"
                      R"j( "summary": "forward of rank 1, step 2400: enc.2 (Fault) produced it)j"
                      R"j( from finite inputs (op torch.log)"})j"});
  d.events.push_back({"nonfinite_origin", d.end_us - 1, R"({"summary": "a later one"})"});
  RunAnalysis a = Analyze(d, Price(3.6));
  ASSERT_EQ(a.findings[0].rule, "exploding_tensor");
  EXPECT_EQ(a.findings[0].evidence,
            before + "; where it began: forward of rank 1, step 2400: enc.2 (Fault) produced it "
                     "from finite inputs (op torch.log)");
  EXPECT_EQ(a.findings[0].recommendation,
            "Guard torch.log in enc.2: it made a NaN/Inf from finite inputs (clamp its input, "
            "add an epsilon, or run it in float32 under autocast). " + plain.recommendation);
  EXPECT_EQ(a.findings[1].evidence.find("where it began"), std::string::npos);  // dataloader's
}

TEST(AnalyzeTest, HealthyRunHasNoFindingsAndNoStopSaving) {
  RunAnalysis a = Analyze(MakeSyntheticRun(Kind("healthy")), Price(1.0));
  EXPECT_TRUE(a.findings.empty());
  EXPECT_EQ(a.rules_clean.size(), 5u);
  EXPECT_EQ(a.cost.after_first_finding_usd, -1);
  EXPECT_GT(a.m.gpu_util_p50, 85);
  EXPECT_LT(a.m.data_wait_share, 0.1);
  EXPECT_EQ(a.outlier_count, 6);
  // System table has p50..max per metric, per-core metrics left out.
  bool saw_gpu = false;
  for (const auto& s : a.system) {
    EXPECT_EQ(s.metric.find("cpu.core"), std::string::npos);
    if (s.metric == "gpu0.util") {
      saw_gpu = true;
      EXPECT_EQ(s.unit, "%");
      EXPECT_LE(s.p.p50, s.p.p95);
      EXPECT_LE(s.p.p99, s.p.max);
    }
  }
  EXPECT_TRUE(saw_gpu);
}

TEST(AnalyzeTest, NoGpuRunAndNoPrice) {
  RunAnalysis a = Analyze(MakeSyntheticRun(Kind("nogpu")), CostInput{});
  EXPECT_EQ(a.m.gpu_count, 0);
  EXPECT_EQ(a.m.gpu_idle_share, -1);
  EXPECT_FALSE(a.cost.available);
  ASSERT_FALSE(a.advice.empty());
  EXPECT_EQ(a.advice[0].kind, "no_gpu");
}

TEST(AnalyzeTest, EmptyRunDoesNotCrash) {
  RunData d;
  d.manifest.name = "empty";
  RunAnalysis a = Analyze(d, Price(1));
  EXPECT_EQ(a.steps, 0);
  EXPECT_FALSE(a.cost.available);  // no duration
  EXPECT_FALSE(SummaryJson(a).empty());
  EXPECT_FALSE(TerminalSummary(a).empty());
  EXPECT_FALSE(ReportHtml(d, a).empty());
}

}  // namespace
}  // namespace trainscope
