#include "trainscope/schema.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace trainscope::schema {
namespace {

TEST(SchemaTest, BuildsAndParsesIndexedMetricNames) {
  EXPECT_EQ(GpuMetric(3, gpu::kUtil), "gpu3.util");
  EXPECT_EQ(CoreMetric(12, core::kUser), "cpu.core12.user");
  EXPECT_EQ(ProcMetric(1234, proc::kRssBytes), "proc.1234.rss_bytes");
  EXPECT_EQ(PsiMetric("io", psi::kSomeAvg10), "psi.io.some_avg10");
  int i = -1;
  std::string_view field;
  ASSERT_TRUE(ParseGpuMetric("gpu12.mem_used_bytes", &i, &field));
  EXPECT_EQ(i, 12);
  EXPECT_EQ(field, "mem_used_bytes");
  for (const char* not_gpu :
       {"gpu.count", "gpu", "gpux.util", "gpu3util", "cpu.util", "gpu1x.util"}) {
    EXPECT_FALSE(ParseGpuMetric(not_gpu, &i, &field)) << not_gpu;
  }
  ASSERT_TRUE(ParseCoreMetric("cpu.core7.util", &i, &field));
  EXPECT_EQ(i, 7);
  EXPECT_EQ(field, "util");
  EXPECT_FALSE(ParseCoreMetric("cpu.count", &i, &field));
  EXPECT_FALSE(ParseCoreMetric("cpu.core.util", &i, &field));
}

TEST(SchemaTest, ChartedMetricsLeaveOutCoresAndProcesses) {
  EXPECT_TRUE(IsChartedMetric(kCpuUtil));
  EXPECT_TRUE(IsChartedMetric(GpuMetric(0, gpu::kMemUsedBytes)));
  EXPECT_TRUE(IsChartedMetric(PsiMetric("cpu", psi::kSomeAvg10)));
  EXPECT_FALSE(IsChartedMetric(CoreMetric(0, core::kUtil)));
  EXPECT_FALSE(IsChartedMetric(kProcTreeRssBytes));
  EXPECT_FALSE(IsChartedMetric(ProcMetric(7, proc::kCpuUtil)));
}

TEST(SchemaTest, UnitsFollowTheNameSuffix) {
  EXPECT_EQ(MetricUnit(kDiskReadBytesPerS), "bytes/s");
  EXPECT_EQ(MetricUnit(kMemUsedBytes), "bytes");
  EXPECT_EQ(MetricUnit(GpuMetric(1, gpu::kSmActive)), "%");
  EXPECT_EQ(MetricUnit(GpuMetric(1, gpu::kPowerW)), "W");
  EXPECT_EQ(MetricUnit(GpuMetric(1, gpu::kTempC)), "°C");
  EXPECT_EQ(MetricUnit(kGpuCount), "");
}

TEST(SchemaTest, SplitIndexedNameGivesPrometheusShape) {
  using L = std::vector<std::pair<std::string, std::string>>;
  IndexedName g = SplitIndexedName("gpu0.mem_used_bytes");
  EXPECT_EQ(g.base, "gpu.mem_used_bytes");
  EXPECT_EQ(g.labels, (L{{"gpu", "0"}}));
  IndexedName c = SplitIndexedName("cpu.core3.user");
  EXPECT_EQ(c.base, "cpu.core.user");
  EXPECT_EQ(c.labels, (L{{"core", "3"}}));
  IndexedName p = SplitIndexedName("proc.1234.rss_bytes");
  EXPECT_EQ(p.base, "proc.rss_bytes");
  EXPECT_EQ(p.labels, (L{{"pid", "1234"}}));
  IndexedName n = SplitIndexedName("12.x..y.3");  // odd names keep a shape
  EXPECT_EQ(n.base, "x.y");
  EXPECT_EQ(n.labels, (L{{"index", "12"}, {"y", "3"}}));
  EXPECT_EQ(SplitIndexedName("gpu.count").base, "gpu.count");
}

TEST(SchemaTest, ParsedSampleView) {
  SystemSampleRecord r;
  r.wall_us = 42;
  r.metrics = {{kCpuUtil, 50},       {kCpuIowait, 5},
               {CoreMetric(0, core::kUtil), 30}, {CoreMetric(1, core::kUtil), 70},
               {CoreMetric(1, core::kUser), 60}, {kGpuCount, 2},
               {GpuMetric(1, gpu::kUtil), 90},   {GpuMetric(1, gpu::kMemUsedBytes), 4},
               {GpuMetric(1, gpu::kMemTotalBytes), 16}, {kMemUsedBytes, 8},
               {ProcMetric(1, proc::kRssBytes), 3}};
  SystemSampleView v = ParseSystemSample(r);
  EXPECT_EQ(v.wall_us, 42);
  EXPECT_EQ(v.cpu_util, 50);
  EXPECT_EQ(v.iowait, 5);
  EXPECT_EQ(v.cores, (std::vector<double>{30, 70}));
  EXPECT_EQ(v.cpu_count, 2);  // from the per-core values when cpu.count is absent
  EXPECT_EQ(v.MaxCore(), 70);
  EXPECT_EQ(v.gpu_count, 2);
  EXPECT_EQ(v.mem_used, 8);
  ASSERT_EQ(v.gpus.size(), 1u);
  ASSERT_NE(v.Gpu(1), nullptr);
  EXPECT_EQ(v.Gpu(0), nullptr);
  EXPECT_EQ(v.Gpu(1)->util, 90);
  EXPECT_EQ(v.Gpu(1)->MemPct(), 25);
  EXPECT_TRUE(std::isnan(v.Gpu(1)->sm_active));
  EXPECT_TRUE(std::isnan(ParseSystemSample({}).MaxCore()));
}

TEST(SchemaTest, EventKindAliasesMapToCanonicalKinds) {
  EXPECT_EQ(CanonicalEventKind("run_end"), event::kRunEnd);
  EXPECT_EQ(CanonicalEventKind("run_ended"), event::kRunEnd);
  EXPECT_EQ(CanonicalEventKind("end"), event::kRunEnd);
  EXPECT_EQ(CanonicalEventKind("profiler_start"), event::kProfilerWindow);
  EXPECT_EQ(CanonicalEventKind("checkpoint"), event::kCheckpoint);
  EXPECT_EQ(CanonicalEventKind("my_event"), "my_event");  // user kinds pass through
  for (const auto& [alias, canonical] : EventKindAliases()) {
    EXPECT_NE(std::find(EventKinds().begin(), EventKinds().end(), canonical), EventKinds().end());
    EXPECT_EQ(std::find(EventKinds().begin(), EventKinds().end(), alias), EventKinds().end());
  }
}

TEST(SchemaTest, StreamAndFileNames) {
  EXPECT_EQ(WorkerStream(3), "worker-3");
  EXPECT_TRUE(IsWorkerStream("worker-0"));
  EXPECT_FALSE(IsWorkerStream("monitor-host"));
  EXPECT_TRUE(IsReservedRunDir("control"));
  EXPECT_TRUE(IsReservedRunDir("profile"));
  EXPECT_TRUE(IsReservedRunDir("outbox"));
  EXPECT_FALSE(IsReservedRunDir("worker-0"));
  EXPECT_EQ(ProfileFile(ProfileFileKind::kTrace, "worker-1"), "trace-worker-1.json");
  EXPECT_EQ(ProfileFile(ProfileFileKind::kFunctions, "worker-1"), "functions-worker-1.json");
  auto t = ParseProfileFileName("trace-worker-1.json");
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->kind, ProfileFileKind::kTrace);
  EXPECT_EQ(t->worker, "worker-1");
  auto f = ParseProfileFileName("functions-a.json");
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->kind, ProfileFileKind::kFunctions);
  EXPECT_EQ(f->worker, "a");
  auto other = ParseProfileFileName("kineto.json");
  ASSERT_TRUE(other.has_value());
  EXPECT_EQ(other->kind, ProfileFileKind::kOther);
  EXPECT_FALSE(ParseProfileFileName(".json").has_value());
  EXPECT_FALSE(ParseProfileFileName("trace-worker-1.txt").has_value());
}

TEST(SchemaTest, ExportedJsonCarriesTheSameNames) {
  nlohmann::json j = nlohmann::json::parse(SchemaJson());
  EXPECT_EQ(j["metrics"]["cpu_util"], kCpuUtil);
  EXPECT_EQ(j["metrics"]["gpu_count"], kGpuCount);
  EXPECT_EQ(j["gpu"]["prefix"], kGpuPrefix);
  EXPECT_EQ(j["gpu"]["fields"]["mem_used_bytes"], gpu::kMemUsedBytes);
  EXPECT_EQ(j["events"].size(), EventKinds().size());
  EXPECT_EQ(j["events"]["run_end"], event::kRunEnd);
  EXPECT_EQ(j["event_aliases"]["run_ended"], event::kRunEnd);
  EXPECT_EQ(j["files"]["stop_request"], kStopRequestFile);
  EXPECT_EQ(j["streams"]["worker_prefix"], kWorkerStreamPrefix);
  std::string js = WebScript();
  EXPECT_NE(js.find("root.TrainscopeSchema = S"), std::string::npos);
  EXPECT_NE(js.find(SchemaJson()), std::string::npos);
  EXPECT_EQ(js.find("</script"), std::string::npos);  // safe to inline in a page
}

}  // namespace
}  // namespace trainscope::schema
