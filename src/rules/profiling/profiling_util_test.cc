#include "rules/profiling/profiling_util.h"

#include "rules/profiling/profiling_test_util.h"

namespace trainscope::rules::testing {
namespace {

TEST(ProfilingUtil, ParsesSampleMetrics) {
  SystemSampleRecord r;
  r.wall_us = 5;
  r.metrics = {{"cpu.util", 50},
               {"cpu.core0.util", 90},
               {"cpu.core1.util", 10},
               {"cpu.core1.user", 99},
               {"gpu.count", 2},
               {"gpu1.util", 30},
               {"gpu1.mem_used_bytes", 1},
               {"gpu1.mem_total_bytes", 4},
               {"gpu10.proc_mem_bytes", 7},
               {"proc.count", 3}};
  SampleView v = ParseSample(r);
  EXPECT_EQ(v.cores.size(), 2u);
  EXPECT_EQ(v.MaxCore(), 90);
  EXPECT_EQ(v.cpu_count, 2);
  EXPECT_EQ(v.proc_count, 3);
  ASSERT_EQ(v.gpus.size(), 2u);
  EXPECT_EQ(v.gpus[1].util, 30);
  EXPECT_EQ(v.gpus[1].MemPct(), 25);
  EXPECT_EQ(v.gpus[10].proc_mem, 7);
}

TEST(ProfilingUtil, PercentileMatchesNumpy) {
  // np.percentile([1, 2, 3, 4], 95) == 3.85; np.percentile([7], 5) == 7
  EXPECT_NEAR(Percentile({4, 1, 3, 2}, 95), 3.85, 1e-12);
  EXPECT_EQ(Percentile({7}, 5), 7);
  EXPECT_TRUE(std::isnan(Percentile({}, 50)));
}

TEST(ProfilingUtil, UsedGpusPreferProcessMemory) {
  GpuUsage u;
  SampleView v;
  v.gpus[0].util = 50;
  v.gpus[1].util = 0;
  u.Update(v);
  EXPECT_TRUE(u.Used(0));
  EXPECT_FALSE(u.Used(1));
  v.gpus[1].proc_mem = 1e9;  // our process tree holds memory on gpu1 only
  u.Update(v);
  EXPECT_FALSE(u.Used(0));
  EXPECT_TRUE(u.Used(1));
}

TEST(ProfilingRules, RegistersNineRulesOnce) {
  RuleRegistry r;
  ASSERT_TRUE(AddProfilingRules(&r).ok());
  EXPECT_EQ(r.Names().size(), 9u);
  EXPECT_NE(r.Find("cpu_bottleneck"), nullptr);
  EXPECT_EQ(AddProfilingRules(&r).code(), Status::Code::kAlreadyExists);
}

TEST(ProfilingRules, ParsedByNameWithDefaults) {
  RuleRegistry r;
  ASSERT_TRUE(AddProfilingRules(&r).ok());
  auto cfg = ParseRuleNames("dataloader,step_outlier", r);
  ASSERT_TRUE(cfg.ok()) << cfg.status().ToString();
  auto bad =
      ParseRulesConfig(R"([{"name":"low_gpu_utilization","params":{"threshold_p95":"170"}}])", r);
  ASSERT_FALSE(bad.ok());  // the config parser creates the rule, which checks the range
  EXPECT_NE(bad.status().message().find("threshold_p95"), std::string::npos)
      << bad.status().ToString();
}

}  // namespace
}  // namespace trainscope::rules::testing
