// GPU collector tests through the fake libnvidia-ml (testing/fake_nvml.c), loaded by path.
#include "sysmon/gpu_collector.h"

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>

namespace trainscope::sysmon {
namespace {

class GpuCollectorTest : public ::testing::Test {
 protected:
  void Script(const std::string& text) {
    path_ = ::testing::TempDir() + "fake_nvml_script.txt";
    FILE* f = fopen(path_.c_str(), "w");
    ASSERT_NE(f, nullptr);
    fputs(text.c_str(), f);
    fclose(f);
    setenv("FAKE_NVML_SCRIPT", path_.c_str(), 1);
  }
  void TearDown() override { unsetenv("FAKE_NVML_SCRIPT"); }
  // Calls one of the fake's test-only counters (a second dlopen shares its state).
  static int FakeCounter(const char* name) {
    void* h = dlopen(TS_FAKE_NVML_PATH, RTLD_NOW | RTLD_NOLOAD);
    if (h == nullptr) return -1;
    auto fn = reinterpret_cast<int (*)()>(dlsym(h, name));
    int v = fn ? fn() : -1;
    dlclose(h);
    return v;
  }
  std::string path_;
};

constexpr char kTwoGpus[] = R"(devices 2
gpu 0 name NVIDIA H100 80GB HBM3
gpu 0 util 35
gpu 0 mem_util 20
gpu 0 mem_total 85899345920
gpu 0 mem_used 1000000
gpu 0 power_mw 251500
gpu 0 power_limit_mw 700000
gpu 0 temp 61
gpu 0 sm_clock 1980
gpu 0 gpm 1
gpu 0 sm_util 42.5
gpu 0 sm_occupancy 30
gpu 0 tensor_util 12.25
gpu 0 dram_util 55
gpu 0 proc 100 4096
gpu 0 proc 200 8192
gpu 1 util 7
gpu 1 unsupported power
)";

TEST_F(GpuCollectorTest, EveryMetricEndToEnd) {
  Script(kTwoGpus);
  GpuCollector c(TS_FAKE_NVML_PATH);
  ASSERT_EQ(c.device_count(), 2u) << c.unavailable_reason();
  EXPECT_EQ(c.device_name(0), "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(c.device_name(1), "Fake GPU 1");
  EXPECT_TRUE(c.gpm_supported(0));
  EXPECT_FALSE(c.gpm_supported(1));
  std::vector<GpuSample> s;
  c.Sample(&s);
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].util, 35);
  EXPECT_EQ(s[0].mem_util, 20);
  EXPECT_EQ(s[0].mem_total_bytes, 85899345920.0);
  EXPECT_EQ(s[0].mem_used_bytes, 1000000.0);
  EXPECT_DOUBLE_EQ(s[0].power_w, 251.5);
  EXPECT_DOUBLE_EQ(s[0].power_limit_w, 700.0);
  EXPECT_EQ(s[0].temp_c, 61);
  EXPECT_EQ(s[0].sm_clock_mhz, 1980);
  EXPECT_TRUE(std::isnan(s[0].sm_active));  // GPM needs two samples
  ASSERT_TRUE(s[0].has_procs);
  ASSERT_EQ(s[0].procs.size(), 2u);
  EXPECT_EQ(s[0].procs[1], (std::pair<unsigned, uint64_t>{200, 8192}));
  EXPECT_TRUE(std::isnan(s[1].power_w));  // NOT_SUPPORTED: skipped, not an error
  EXPECT_EQ(s[1].util, 7);
  c.Sample(&s);
  EXPECT_DOUBLE_EQ(s[0].sm_active, 42.5);
  EXPECT_DOUBLE_EQ(s[0].sm_occupancy, 30.0);
  EXPECT_DOUBLE_EQ(s[0].tensor_active, 12.25);
  EXPECT_DOUBLE_EQ(s[0].dram_active, 55.0);
  EXPECT_TRUE(std::isnan(s[1].sm_active));
  EXPECT_EQ(c.errors(), 0u);
  EXPECT_EQ(FakeCounter("fakeNvmlGpmSamplesLive"), 2);
}

TEST_F(GpuCollectorTest, ShutdownAndGpmFreeOnDestruction) {
  Script(kTwoGpus);
  auto c = std::make_unique<GpuCollector>(TS_FAKE_NVML_PATH);
  ASSERT_EQ(c->device_count(), 2u);
  // Hold the library so its counters survive the collector's dlclose.
  void* keep = dlopen(TS_FAKE_NVML_PATH, RTLD_NOW | RTLD_NOLOAD);
  ASSERT_NE(keep, nullptr);
  const int shutdowns = FakeCounter("fakeNvmlShutdownCount");
  EXPECT_EQ(FakeCounter("fakeNvmlGpmSamplesLive"), 2);
  c.reset();
  EXPECT_EQ(FakeCounter("fakeNvmlGpmSamplesLive"), 0);
  EXPECT_EQ(FakeCounter("fakeNvmlShutdownCount"), shutdowns + 1);
  dlclose(keep);
}

TEST_F(GpuCollectorTest, MissingLibraryMeansNoGpu) {
  GpuCollector c("/nonexistent/libnvidia-ml.so.1");
  EXPECT_EQ(c.device_count(), 0u);
  EXPECT_NE(c.unavailable_reason().find("cannot open"), std::string::npos);
  EXPECT_EQ(c.errors(), 0u);
  std::vector<GpuSample> s;
  c.Sample(&s);
  EXPECT_TRUE(s.empty());
}

TEST_F(GpuCollectorTest, InitFailureMeansNoGpu) {
  Script("init_fail NVML_ERROR_DRIVER_NOT_LOADED\n");
  GpuCollector c(TS_FAKE_NVML_PATH);
  EXPECT_EQ(c.device_count(), 0u);
  EXPECT_NE(c.unavailable_reason().find("NVML_ERROR_DRIVER_NOT_LOADED"), std::string::npos)
      << c.unavailable_reason();
}

TEST_F(GpuCollectorTest, EnvOverridesDefaultPath) {
  setenv("TRAINSCOPE_NVML_LIB", TS_FAKE_NVML_PATH, 1);
  EXPECT_EQ(NvmlLib::DefaultPath(), TS_FAKE_NVML_PATH);
  Script("devices 3\n");
  GpuCollector c("");
  EXPECT_EQ(c.device_count(), 3u);
  unsetenv("TRAINSCOPE_NVML_LIB");
  EXPECT_EQ(NvmlLib::DefaultPath(), "libnvidia-ml.so.1");
}

TEST_F(GpuCollectorTest, GpuLostMidRunIsCountedAndSamplingGoesOn) {
  // One GPU; construction makes 2 queries (name, GPM support), each sample 7 (util, memory,
  // power, power limit, temp, clock, processes). After 12 successful queries the fake answers
  // GPU_IS_LOST: the second sample loses its last 4 metrics.
  Script("gpu 0 util 50\ngpu 0 power_mw 1000\nfail_after 12 NVML_ERROR_GPU_IS_LOST\n");
  GpuCollector c(TS_FAKE_NVML_PATH);
  ASSERT_EQ(c.device_count(), 1u);
  std::vector<GpuSample> s;
  c.Sample(&s);
  EXPECT_EQ(s[0].util, 50);
  EXPECT_EQ(c.errors(), 0u);
  c.Sample(&s);
  EXPECT_EQ(s[0].util, 50);                     // query 10
  EXPECT_DOUBLE_EQ(s[0].power_w, 1.0);          // query 12
  EXPECT_TRUE(std::isnan(s[0].power_limit_w));  // GPU lost from here on
  EXPECT_TRUE(std::isnan(s[0].temp_c));
  EXPECT_FALSE(s[0].has_procs);
  EXPECT_EQ(c.errors(), 4u);
  c.Sample(&s);  // still sampling; every call fails and is counted
  EXPECT_TRUE(std::isnan(s[0].util));
  EXPECT_EQ(c.errors(), 11u);
}

TEST_F(GpuCollectorTest, ProcessApiFallsBackToV2AndV1) {
  for (int api : {2, 1}) {
    Script("gpu 0 proc 7 1234\nproc_api " + std::to_string(api) + "\n");
    GpuCollector c(TS_FAKE_NVML_PATH);
    std::vector<GpuSample> s;
    c.Sample(&s);
    ASSERT_TRUE(s[0].has_procs) << api;
    ASSERT_EQ(s[0].procs.size(), 1u);
    EXPECT_EQ(s[0].procs[0], (std::pair<unsigned, uint64_t>{7, 1234})) << api;
    EXPECT_EQ(c.errors(), 0u);
  }
}

TEST_F(GpuCollectorTest, ManyProcessesGrowTheBuffer) {
  std::string script;
  for (int i = 0; i < 100; ++i) script += "gpu 0 proc " + std::to_string(1000 + i) + " 1\n";
  Script(script);
  GpuCollector c(TS_FAKE_NVML_PATH);
  std::vector<GpuSample> s;
  c.Sample(&s);
  ASSERT_TRUE(s[0].has_procs);
  EXPECT_EQ(s[0].procs.size(), 100u);  // more than the initial 64 slots
  EXPECT_EQ(c.errors(), 0u);
}

}  // namespace
}  // namespace trainscope::sysmon
