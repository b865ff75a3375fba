// Round trip through the store: a synthetic run written with trainscope::Writer and read back
// with LoadRunData analyses the same as the in-memory original.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "report/test_runs.h"
#include "trainscope/report.h"

namespace trainscope {
namespace {

namespace fs = std::filesystem;

TEST(RunDataTest, WrittenRunReadsBackAndAnalysesTheSame) {
  fs::path dir = fs::temp_directory_path() / ("ts-rundata-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  testing::SyntheticOptions o;
  o.kind = "faulty";
  o.steps = 1200;
  RunData mem = testing::MakeSyntheticRun(o);
  ASSERT_TRUE(testing::WriteRun(mem, dir.string()).ok());
  auto disk = LoadRunData(dir.string());
  ASSERT_TRUE(disk.ok()) << disk.status().ToString();
  EXPECT_EQ(disk->manifest.id, mem.manifest.id);
  EXPECT_EQ(disk->manifest.start_us, mem.manifest.start_us);
  ASSERT_EQ(disk->steps.count("worker-0"), 1u);
  EXPECT_EQ(disk->steps["worker-0"].size(), 1200u);
  EXPECT_EQ(disk->system["monitor-trainer-1"].size(), mem.system["monitor-trainer-1"].size());
  EXPECT_EQ(disk->scalars.size(), mem.scalars.size());
  EXPECT_EQ(disk->tensors.size(), mem.tensors.size());
  EXPECT_EQ(disk->rule_events.size(), mem.rule_events.size());
  EXPECT_EQ(disk->end_us, mem.end_us);
  ASSERT_EQ(disk->profiles.size(), 1u);
  EXPECT_EQ(disk->profiles[0].functions.size(), 4u);
  EXPECT_EQ(disk->profiles[0].functions[0].name, "DataLoader.__next__");
  EXPECT_EQ(disk->profiles[0].trace_file, "profile/trace-worker-0.json");
  EXPECT_EQ(disk->corrupt_regions, 0u);

  CostInput price;
  price.price_per_hour = 2;
  RunAnalysis a = Analyze(mem, price), b = Analyze(*disk, price);
  EXPECT_EQ(a.steps, b.steps);
  EXPECT_DOUBLE_EQ(a.duration_s, b.duration_s);
  EXPECT_DOUBLE_EQ(a.step_ms.p95, b.step_ms.p95);
  EXPECT_DOUBLE_EQ(a.m.gpu_idle_share, b.m.gpu_idle_share);
  EXPECT_DOUBLE_EQ(a.cost.total_usd, b.cost.total_usd);
  EXPECT_EQ(a.rules_fired, b.rules_fired);

  // And into the history, as the lead's run-end hook does.
  std::string db = (dir / "history.db").string();
  ASSERT_TRUE(RecordRunInHistory(dir.string(), db).ok());
  auto e = LookupRun(mem.manifest.id, db);
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_EQ(e->steps, 1200);
  EXPECT_GT(e->cost_usd, 0);  // g5.2xlarge from the run's configuration
  auto by_path = LookupRun(dir.string(), db);
  ASSERT_TRUE(by_path.ok());
  EXPECT_EQ(by_path->id, mem.manifest.id);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace trainscope
