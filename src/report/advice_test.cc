// Each instance-recommendation rule on measurements that should and should not produce it.
#include <gtest/gtest.h>

#include "trainscope/report.h"

namespace trainscope {
namespace {

class AdviceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto c = LoadInstanceCatalog();
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    catalog_ = std::move(*c);
  }
  CostInput On(const std::string& instance) {
    CostInput in;
    in.catalog = &catalog_;
    in.instance = catalog_.Find(instance);
    EXPECT_NE(in.instance, nullptr) << instance;
    in.price_per_hour = in.instance->price_per_hour;
    return in;
  }
  static Measurements Gpu(double util_p50, double util_p95) {
    Measurements m;
    m.duration_s = 10 * 3600;
    m.gpu_count = 1;
    m.gpu_util_mean = util_p50;
    m.gpu_util_p50 = util_p50;
    m.gpu_util_p95 = util_p95;
    m.gpu_idle_share = util_p50 < 20 ? 0.6 : 0.02;
    m.gpu_mem_used_max_gb = 14;
    m.gpu_mem_total_gb = 16;
    m.cpu_cores = 8;
    m.cpu_util_p50 = 40;
    m.cpu_util_p95 = 60;
    m.mem_used_max_gb = 20;
    m.mem_total_gb = 61;
    m.data_wait_share = 0.03;
    return m;
  }
  static double Cost(const Measurements& m, const CostInput& c) {
    return m.duration_s / 3600 * c.price_per_hour;
  }
  InstanceCatalog catalog_;
};

TEST_F(AdviceTest, CatalogueCoversTheCommonCloudsAndCarriesDates) {
  for (const char* name : {"p3.2xlarge", "p4d.24xlarge", "p5.48xlarge", "g4dn.xlarge", "g5.xlarge",
                           "g6.xlarge", "a2-highgpu-1g", "a3-highgpu-8g", "g2-standard-4",
                           "n1-standard-8+1xT4", "Standard_NC6s_v3", "Standard_ND96asr_v4"}) {
    const InstanceType* t = catalog_.Find(name);
    ASSERT_NE(t, nullptr) << name;
    EXPECT_GT(t->price_per_hour, 0);
    EXPECT_FALSE(t->price_date.empty());
    EXPECT_GT(t->gpu_count, 0);
  }
  EXPECT_NE(catalog_.Find("P3.2XLARGE"), nullptr);  // case-insensitive
  EXPECT_EQ(catalog_.Find("p9.nonexistent"), nullptr);
}

TEST_F(AdviceTest, SaturatedGpuSuggestsAFasterOneWhenItPaysOff) {
  CostInput c = On("g4dn.2xlarge");  // T4
  Measurements m = Gpu(97, 99);
  auto a = AdviseLargerGpu(m, c, Cost(m, c));
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->kind, "larger_gpu");
  EXPECT_FALSE(a->instance.empty());
  const InstanceType* to = catalog_.Find(a->instance);
  ASSERT_NE(to, nullptr);
  EXPECT_GT(to->gpu_speed, c.instance->gpu_speed);
  EXPECT_EQ(to->provider, "aws");
  EXPECT_GT(a->saving_usd, 0);
  EXPECT_NE(a->evidence.find("97%"), std::string::npos);
}

TEST_F(AdviceTest, NoLargerGpuWhenTheGpuWaitsOrIsNotBusy) {
  CostInput c = On("g4dn.2xlarge");
  Measurements busy_but_waiting = Gpu(95, 99);
  busy_but_waiting.data_wait_share = 0.3;
  EXPECT_FALSE(AdviseLargerGpu(busy_but_waiting, c, 100).has_value());
  EXPECT_FALSE(AdviseLargerGpu(Gpu(60, 80), c, 100).has_value());
  Measurements cpu_only = Gpu(97, 99);
  cpu_only.gpu_count = 0;
  EXPECT_FALSE(AdviseLargerGpu(cpu_only, c, 100).has_value());
}

TEST_F(AdviceTest, StarvedGpuWithBusyCpuMeansFixTheInputPipeline) {
  CostInput c = On("p3.2xlarge");  // V100, 8 vCPU, $3.06/h
  Measurements m = Gpu(15, 40);
  m.cpu_util_p95 = 97;
  m.data_wait_share = 0.45;
  m.gpu_mem_used_max_gb = 6;
  auto a = AdviseInputPipeline(m, c, Cost(m, c));
  ASSERT_TRUE(a.has_value());
  EXPECT_NE(a->text.find("input pipeline"), std::string::npos);
  EXPECT_NE(a->text.find("CPU"), std::string::npos);
  // A cheaper instance with more CPU that still covers the GPU work done.
  ASSERT_EQ(a->kind, "cheaper_gpu");
  const InstanceType* to = catalog_.Find(a->instance);
  ASSERT_NE(to, nullptr);
  EXPECT_LT(to->price_per_hour, c.instance->price_per_hour);
  EXPECT_GE(to->vcpus, 12);
  EXPECT_GT(a->saving_usd, 0);
  EXPECT_NEAR(a->saving_usd, (c.instance->price_per_hour - to->price_per_hour) * 10, 1e-9);
}

TEST_F(AdviceTest, NoInputPipelineAdviceWhenTheGpuIsBusyOrNothingStarvesIt) {
  CostInput c = On("p3.2xlarge");
  Measurements busy = Gpu(92, 98);
  busy.cpu_util_p95 = 97;
  EXPECT_FALSE(AdviseInputPipeline(busy, c, 30).has_value());
  Measurements idle_no_cause = Gpu(15, 40);  // low use but neither CPU nor loader is the cause
  EXPECT_FALSE(AdviseInputPipeline(idle_no_cause, c, 30).has_value());
}

TEST_F(AdviceTest, MemoryFarBelowCapacitySuggestsASmallerInstance) {
  CostInput c = On("p3.8xlarge");  // 4x V100
  Measurements m = Gpu(20, 35);
  m.gpu_count = 4;
  m.gpu_mem_used_max_gb = 3;
  m.mem_used_max_gb = 12;
  m.mem_total_gb = 244;
  m.cpu_util_p95 = 20;
  auto a = AdviseSmallerInstance(m, c, Cost(m, c));
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->kind, "smaller_instance");
  const InstanceType* to = catalog_.Find(a->instance);
  ASSERT_NE(to, nullptr);
  EXPECT_LT(to->price_per_hour, c.instance->price_per_hour);
  EXPECT_GT(a->saving_share, 0.5);
  EXPECT_NE(a->evidence.find("3.0 of 16 GB"), std::string::npos);
}

TEST_F(AdviceTest, NoSmallerInstanceWhenMemoryOrGpuIsWellUsed) {
  CostInput c = On("p3.8xlarge");
  Measurements full_memory = Gpu(20, 35);
  full_memory.gpu_mem_used_max_gb = 14;
  EXPECT_FALSE(AdviseSmallerInstance(full_memory, c, 100).has_value());
  Measurements busy = Gpu(85, 95);
  busy.gpu_mem_used_max_gb = 3;
  EXPECT_FALSE(AdviseSmallerInstance(busy, c, 100).has_value());
  Measurements host_full = Gpu(20, 35);
  host_full.gpu_mem_used_max_gb = 3;
  host_full.mem_used_max_gb = 50;
  host_full.mem_total_gb = 61;
  EXPECT_FALSE(AdviseSmallerInstance(host_full, c, 100).has_value());
}

TEST_F(AdviceTest, NoGpuSaysSoAndUsesCpuAndDataWait) {
  Measurements m;
  m.duration_s = 3600;
  m.cpu_util_p50 = 97;
  m.cpu_util_p95 = 99;
  CostInput c;
  c.catalog = &catalog_;
  auto a = AdviseNoGpu(m, c, 1.0);
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->kind, "no_gpu");
  EXPECT_NE(a->text.find("No GPU"), std::string::npos);
  EXPECT_NE(a->text.find("saturated"), std::string::npos);
  m.data_wait_share = 0.5;
  a = AdviseNoGpu(m, c, 1.0);
  EXPECT_NE(a->text.find("waits for data"), std::string::npos);
  m.data_wait_share = 0.05;
  m.cpu_util_p50 = 10;
  m.cpu_util_p95 = 20;
  a = AdviseNoGpu(m, c, 1.0);
  EXPECT_NE(a->text.find("mostly idle"), std::string::npos);
  EXPECT_GT(a->saving_usd, 0);
  EXPECT_FALSE(AdviseNoGpu(Gpu(50, 60), c, 1.0).has_value());
}

TEST_F(AdviceTest, AdviseInstanceSortsBySavingAndSaysKeepWhenNothingApplies) {
  CostInput c = On("g5.2xlarge");
  Measurements ok = Gpu(75, 85);
  ok.gpu_mem_used_max_gb = 18;
  ok.gpu_mem_total_gb = 24;
  auto v = AdviseInstance(ok, c, Cost(ok, c));
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].kind, "keep");
}

TEST_F(AdviceTest, ResolveCostPrefersTheUsersPriceThenInstanceThenConfig) {
  RunManifest m;
  m.config_json = R"({"instance_type": "g4dn.xlarge"})";
  auto c = ResolveCost(m, 2.5, "", &catalog_);
  ASSERT_TRUE(c.ok());
  EXPECT_DOUBLE_EQ(c->price_per_hour, 2.5);
  EXPECT_EQ(c->price_source, "--price-per-hour");
  c = ResolveCost(m, 0, "p3.2xlarge", &catalog_);
  ASSERT_TRUE(c.ok());
  EXPECT_DOUBLE_EQ(c->price_per_hour, 3.06);
  c = ResolveCost(m, 0, "", &catalog_);
  ASSERT_TRUE(c.ok());
  EXPECT_DOUBLE_EQ(c->price_per_hour, 0.526);
  EXPECT_FALSE(ResolveCost(m, 0, "nope.large", &catalog_).ok());
  m.config_json = "{}";
  c = ResolveCost(m, 0, "", &catalog_);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->price_per_hour, 0);
}

}  // namespace
}  // namespace trainscope
