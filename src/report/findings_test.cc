#include <gtest/gtest.h>

#include <cmath>

#include "trainscope/report.h"

namespace trainscope {
namespace {

RuleEventRecord Fired(const std::string& rule, int64_t step, double value, double threshold) {
  RuleEventRecord e;
  e.rule = rule;
  e.status = RuleStatus::kIssuesFound;
  e.step = step;
  e.value = value;
  e.threshold = threshold;
  e.firing = 1;
  return e;
}

TEST(FindingsTest, DataloaderRecommendationComesFromTheMeasurements) {
  Measurements m;
  m.gpu_count = 1;
  m.cpu_cores = 8;
  m.gpu_idle_share = 0.62;
  m.data_wait_ms_per_step = 48;
  m.data_wait_share = 0.34;
  m.num_workers = 2;
  m.pin_memory = 0;
  Finding f = MakeFinding(Fired("dataloader", 200, 25, 70), 1, m);
  EXPECT_EQ(f.title, "Data loader too slow");
  EXPECT_EQ(f.severity, Severity::kWarning);
  EXPECT_FALSE(f.stop_worthy);
  EXPECT_EQ(f.recommendation,
            "GPU idle 62% of the time while the data loader waited 48 ms per step (34% of step "
            "time): raise num_workers from 2 to 4 and set pin_memory=True.");
  EXPECT_EQ(f.evidence, "value 25 < threshold 70 at step 200");
  // Already pinned, more workers than cores allow: different advice.
  m.pin_memory = 1;
  m.num_workers = 7;
  f = MakeFinding(Fired("dataloader", 200, 25, 70), 1, m);
  EXPECT_NE(f.recommendation.find("already uses the cores"), std::string::npos);
  EXPECT_EQ(f.recommendation.find("pin_memory"), std::string::npos);
  // Unknown worker count: a number from the cores per GPU.
  m.num_workers = -1;
  m.gpu_count = 2;
  f = MakeFinding(Fired("dataloader", 200, 25, 70), 1, m);
  EXPECT_NE(f.recommendation.find("num_workers to about 3 (8 cores for 2 GPUs)"),
            std::string::npos);
}

TEST(FindingsTest, SeverityAndStopWorthiness) {
  Measurements m;
  Finding nan = MakeFinding(Fired("exploding_tensor", 10, std::nan(""), std::nan("")), 3, m);
  EXPECT_EQ(nan.severity, Severity::kCritical);
  EXPECT_TRUE(nan.stop_worthy);
  EXPECT_EQ(nan.firings, 3u);
  EXPECT_NE(nan.recommendation.find("clip_grad_norm_"), std::string::npos);
  EXPECT_EQ(nan.evidence, "at step 10");
  Finding outlier = MakeFinding(Fired("step_outlier", 5, 900, 300), 1, m);
  EXPECT_EQ(outlier.severity, Severity::kInfo);
  EXPECT_FALSE(outlier.stop_worthy);
}

TEST(FindingsTest, InstanceNamesWithSuffixesAndUnknownRules) {
  Measurements m;
  EXPECT_EQ(MakeFinding(Fired("loss_not_decreasing_eval", 1, 1, 1), 1, m).title,
            "Loss not decreasing");
  Finding custom = MakeFinding(Fired("my_custom_rule", 1, 1, 1), 1, m);
  EXPECT_EQ(custom.title, "my_custom_rule");
  EXPECT_NE(custom.recommendation.find("Custom rule"), std::string::npos);
}

TEST(FindingsTest, EveryBuiltinRuleHasItsOwnRecommendation) {
  Measurements m;
  for (const char* r : {"vanishing_gradient",
                        "exploding_tensor",
                        "loss_not_decreasing",
                        "dead_loss",
                        "overfit",
                        "overtraining",
                        "stalled_training_loop",
                        "weight_update_ratio",
                        "dead_relu",
                        "saturated_activation",
                        "poor_weight_initialization",
                        "tensor_variance",
                        "unchanged_tensor",
                        "all_zero",
                        "class_imbalance",
                        "check_input_images",
                        "amp_loss_scale",
                        "cpu_bottleneck",
                        "io_bottleneck",
                        "low_gpu_utilization",
                        "gpu_memory_increase",
                        "batch_size",
                        "load_balancing",
                        "step_outlier",
                        "max_initialization_time",
                        "dataloader"}) {
    Finding f = MakeFinding(Fired(r, 1, 1, 2), 1, m);
    EXPECT_NE(f.title, r) << r;
    EXPECT_EQ(f.recommendation.find("Custom rule"), std::string::npos) << r;
    EXPECT_GT(f.recommendation.size(), 40u) << r;
  }
}

TEST(FindingsTest, ACustomRulesWordsComeFromItsFiring) {
  Measurements m;
  RuleEventRecord e = Fired("overfit_my_check", 12, 3, 1);  // its own words beat the prefix
  e.details_json =
      R"({"consecutive":1,"first_step":12,"title":"Loss above the limit","severity":"critical",)"
      R"("stop_worthy":false,"advice":"Lower the learning rate."})";
  Finding f = MakeFinding(e, 2, m);
  EXPECT_EQ(f.title, "Loss above the limit");
  EXPECT_EQ(f.severity, Severity::kCritical);
  EXPECT_FALSE(f.stop_worthy);
  EXPECT_EQ(f.recommendation, "Lower the learning rate.");
  // Without words (or an empty title/advice) it reads as before: its id and generic advice.
  e.details_json = R"({"consecutive":1,"title":"","advice":""})";
  e.rule = "GradTooBig";
  Finding plain = MakeFinding(e, 1, m);
  EXPECT_EQ(plain.title, "GradTooBig");
  EXPECT_EQ(plain.severity, Severity::kWarning);
  EXPECT_NE(plain.recommendation.find("Custom rule"), std::string::npos);
}

}  // namespace
}  // namespace trainscope
