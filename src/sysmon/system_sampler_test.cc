// SystemSampler end to end on fixtures: the root is a symlink switched between recorded
// snapshots, the clock is passed to SampleOnce, GPUs come from the fake NVML.
#include <gtest/gtest.h>
#include <unistd.h>

#include <condition_variable>
#include <cstdio>
#include <map>
#include <mutex>

#include "sysmon/test_util.h"
#include "trainscope/sysmon.h"

namespace trainscope {
namespace {

using MetricMap = std::map<std::string, double>;

class SamplerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/ts_sysmon_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    link_ = dir_ + "/root";
  }
  void TearDown() override {
    unlink(link_.c_str());
    rmdir(dir_.c_str());
    unsetenv("FAKE_NVML_SCRIPT");
  }
  // Points the sampler's root at testdata/proc/container_v2_64core/<snapshot>.
  void Use(const std::string& snapshot) {
    unlink(link_.c_str());
    ASSERT_EQ(
        symlink(sysmon::testing::Fixture("container_v2_64core/" + snapshot).c_str(), link_.c_str()),
        0);
  }
  SystemSamplerOptions Options() {
    SystemSamplerOptions o;
    o.root = link_;
    o.root_pid = 1;
    o.clock_ticks_per_s = 100;
    o.page_size = 4096;
    o.gpu = false;
    return o;
  }
  std::unique_ptr<SystemSampler> Make(SystemSamplerOptions o) {
    auto r = SystemSampler::Create(
        std::move(o), [this](SystemSampleRecord rec) { records_.push_back(std::move(rec)); });
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? std::move(r).value() : nullptr;
  }
  MetricMap Last() {
    MetricMap m;
    for (const auto& [k, v] : records_.back().metrics) {
      EXPECT_TRUE(m.emplace(k, v).second) << "duplicate metric " << k;
    }
    return m;
  }
  std::string dir_, link_;
  std::vector<SystemSampleRecord> records_;
};

TEST_F(SamplerTest, RejectsBadIntervals) {
  for (int64_t ms : {0, 99, 60001}) {
    SystemSamplerOptions o;
    o.interval_ms = ms;
    auto r = SystemSampler::Create(o, [](SystemSampleRecord) {});
    EXPECT_EQ(r.status().code(), Status::Code::kInvalidArgument) << ms;
  }
  SystemSamplerOptions o;
  EXPECT_FALSE(SystemSampler::Create(o, nullptr).ok());
}

TEST_F(SamplerTest, ContainerFixtureMetrics) {
  Use("t0");
  auto s = Make(Options());
  ASSERT_NE(s, nullptr);
  s->SampleOnce(10'000'000, 1'700'000'000'000'000);
  MetricMap m0 = Last();
  EXPECT_EQ(records_.back().wall_us, 1'700'000'000'000'000);
  EXPECT_EQ(m0.count("cpu.util"), 0u);  // no rates in the first sample
  EXPECT_EQ(m0["cpu.count"], 64);
  EXPECT_EQ(m0["proc.count"], 6);
  Use("t1");
  s->SampleOnce(11'000'000, 1'700'000'001'000'000);
  MetricMap m = Last();
  EXPECT_DOUBLE_EQ(m["cpu.util"], 100.0 * 4440 / 6400);
  EXPECT_DOUBLE_EQ(m["cpu.core63.util"], 100.0);
  EXPECT_DOUBLE_EQ(m["cpu.core5.util"], 70.0);
  EXPECT_EQ(m.count("cpu.core5.user"), 0u);  // per_core_detail off
  EXPECT_DOUBLE_EQ(m["mem.total_bytes"], 528280576.0 * 1024);
  EXPECT_DOUBLE_EQ(m["mem.used_bytes"], (528280576.0 - 460324864.0) * 1024);
  EXPECT_DOUBLE_EQ(m["disk.read_bytes_per_s"], 1048576.0);
  EXPECT_DOUBLE_EQ(m["disk.write_bytes_per_s"], 4194304.0);
  EXPECT_DOUBLE_EQ(m["net.rx_bytes_per_s"], 125000000.0);
  EXPECT_DOUBLE_EQ(m["net.tx_bytes_per_s"], 25000000.0);
  EXPECT_DOUBLE_EQ(m["psi.cpu.some_avg10"], 12.5);
  EXPECT_DOUBLE_EQ(m["psi.cpu.some_stall_pct"], 25.0);
  EXPECT_DOUBLE_EQ(m["psi.memory.full_stall_pct"], 1.0);
  EXPECT_DOUBLE_EQ(m["cgroup.cpu_limit_cores"], 16.0);
  EXPECT_DOUBLE_EQ(m["cgroup.mem_limit_bytes"], 68719476736.0);
  EXPECT_DOUBLE_EQ(m["cgroup.mem_used_bytes"], 35433480192.0);
  EXPECT_DOUBLE_EQ(m["cgroup.cpu_usage_cores"], 7.2);
  EXPECT_DOUBLE_EQ(m["cgroup.cpu_throttled_pct"], 30.0);
  EXPECT_DOUBLE_EQ(m["proc.tree_cpu_util"], 650.0);
  EXPECT_DOUBLE_EQ(m["proc.1.cpu_util"], 200.0);
  EXPECT_DOUBLE_EQ(m["proc.57.cpu_util"], 50.0);
  EXPECT_DOUBLE_EQ(m["proc.57.rss_bytes"], 16384.0 * 4096);
  EXPECT_EQ(m.count("proc.60.cpu_util"), 0u);  // sshd is not in the tree
  EXPECT_EQ(m["sysmon.errors"], 0);
  EXPECT_EQ(s->stats().samples, 2u);
}

TEST_F(SamplerTest, BrokenFilesKeepPreviousValuesAndCount) {
  Use("t0");
  auto s = Make(Options());
  s->SampleOnce(0, 0);
  Use("t1");
  s->SampleOnce(1'000'000, 1);
  MetricMap good = Last();
  for (const char* variant : {"truncated", "garbage"}) {
    Use(variant);
    s->SampleOnce(2'000'000, 2);
    MetricMap m = Last();
    for (const char* k : {"cpu.util", "cpu.core5.util", "mem.used_bytes", "disk.write_bytes_per_s",
                          "net.rx_bytes_per_s", "psi.cpu.some_avg10", "cgroup.cpu_limit_cores",
                          "proc.tree_cpu_util"}) {
      EXPECT_EQ(m[k], good[k]) << variant << " " << k;
    }
    EXPECT_GT(m["sysmon.errors"], good["sysmon.errors"]) << variant;
    good["sysmon.errors"] = m["sysmon.errors"];
  }
  SystemSamplerStats st = s->stats();
  EXPECT_EQ(st.cpu_errors, 2u);
  EXPECT_EQ(st.mem_errors, 2u);
  EXPECT_EQ(st.disk_errors, 2u);
  EXPECT_EQ(st.net_errors, 2u);
  EXPECT_EQ(st.pressure_errors, 2u);  // /proc/pressure/cpu only; memory and io are intact
  EXPECT_EQ(st.cgroup_errors, 2u);
  EXPECT_GE(st.process_errors, 2u);
  EXPECT_EQ(st.errors, static_cast<uint64_t>(Last()["sysmon.errors"]));
  // Recovery: good files again, rates over the 2 s since the last good snapshot.
  Use("t1");
  s->SampleOnce(3'000'000, 3);
  EXPECT_DOUBLE_EQ(Last()["disk.read_bytes_per_s"], 0.0);  // t1 again: no change
}

TEST_F(SamplerTest, GpuMetricsFromFakeNvml) {
  std::string script = dir_ + "/nvml.txt";
  FILE* f = fopen(script.c_str(), "w");
  fputs(
      "devices 1\ngpu 0 util 35\ngpu 0 mem_used 1000000\ngpu 0 mem_total 2000000\n"
      "gpu 0 power_mw 300000\ngpu 0 power_limit_mw 700000\ngpu 0 temp 55\ngpu 0 sm_clock 1755\n"
      "gpu 0 gpm 1\ngpu 0 sm_util 80\ngpu 0 tensor_util 45\n"
      "gpu 0 proc 1 5000\ngpu 0 proc 57 700\ngpu 0 proc 60 99999\n",
      f);
  fclose(f);
  setenv("FAKE_NVML_SCRIPT", script.c_str(), 1);
  Use("t0");
  SystemSamplerOptions o = Options();
  o.gpu = true;
  o.nvml_library = TS_FAKE_NVML_PATH;
  auto s = Make(o);
  EXPECT_EQ(s->stats().gpu_count, 1u);
  s->SampleOnce(0, 0);
  s->SampleOnce(500'000, 1);
  MetricMap m = Last();
  EXPECT_EQ(m["gpu.count"], 1);
  EXPECT_EQ(m["gpu0.util"], 35);
  EXPECT_EQ(m["gpu0.mem_used_bytes"], 1000000);
  EXPECT_EQ(m["gpu0.mem_total_bytes"], 2000000);
  EXPECT_EQ(m["gpu0.power_w"], 300);
  EXPECT_EQ(m["gpu0.power_limit_w"], 700);
  EXPECT_EQ(m["gpu0.temp_c"], 55);
  EXPECT_EQ(m["gpu0.sm_clock_mhz"], 1755);
  EXPECT_EQ(m["gpu0.sm_active"], 80);
  EXPECT_EQ(m["gpu0.tensor_active"], 45);
  EXPECT_EQ(m["gpu0.proc_mem_bytes"], 5700);  // pids 1 and 57 are in the tree, 60 is not
  EXPECT_EQ(m["gpu0.proc_count"], 3);
}

TEST_F(SamplerTest, NoNvmlMeansZeroGpusNotAnError) {
  Use("t0");
  SystemSamplerOptions o = Options();
  o.gpu = true;
  o.nvml_library = "/nonexistent/libnvidia-ml.so.1";
  auto s = Make(o);
  s->SampleOnce(0, 0);
  MetricMap m = Last();
  EXPECT_EQ(m["gpu.count"], 0);
  EXPECT_EQ(m["sysmon.errors"], 0);
  EXPECT_NE(s->stats().gpu_unavailable_reason, "");
}

TEST_F(SamplerTest, ThreadStartsSamplesAndStopsPromptly) {
  // Real /proc, 60 s interval: the first sample is taken at Start(); Stop() must not wait for
  // the next deadline (a hang here would time the test out).
  std::mutex mu;
  std::condition_variable cv;
  int n = 0;
  SystemSamplerOptions o;
  o.interval_ms = 60000;
  o.gpu = false;
  auto r = SystemSampler::Create(o, [&](SystemSampleRecord rec) {
    EXPECT_FALSE(rec.metrics.empty());
    std::lock_guard<std::mutex> l(mu);
    ++n;
    cv.notify_all();
  });
  ASSERT_TRUE(r.ok());
  auto s = std::move(r).value();
  ASSERT_TRUE(s->Start().ok());
  EXPECT_EQ(s->Start().code(), Status::Code::kAlreadyExists);
  {
    std::unique_lock<std::mutex> l(mu);
    cv.wait(l, [&] { return n >= 1; });
  }
  s->Stop();
  s->Stop();  // idempotent
  EXPECT_EQ(n, 1);
  EXPECT_EQ(s->stats().samples, 1u);
  ASSERT_TRUE(s->Start().ok());  // restartable; the destructor joins
}

TEST_F(SamplerTest, SinkThatThrowsIsCounted) {
  Use("t0");
  auto r = SystemSampler::Create(Options(), [](SystemSampleRecord) { throw 1; });
  ASSERT_TRUE(r.ok());
  r.value()->SampleOnce(0, 0);
  EXPECT_EQ(r.value()->stats().sink_errors, 1u);
}

}  // namespace
}  // namespace trainscope
